//! Histograms as text: HdrHistogram's "V2 + DEFLATE" encoding in base64 (the form of
//! HdrHistogram's interval logs, `HISTF...`), shared by `--json`, `--hdr-log` and `loader merge`.

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::io::Read;

/// Encode a histogram: V2 + DEFLATE, base64.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => shared::base64::encode(&buf),
        // Serializing into a Vec cannot fail for a histogram of u64 counts; keep the document
        // valid anyway.
        Err(_) => String::new(),
    }
}

/// The cookies of HdrHistogram's V2 encoding, plain and DEFLATE-compressed.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// A V2 header after its cookie: payload length, normalizing offset, digits, lowest, highest,
/// integer-to-double ratio.
const V2_HEADER: usize = 36;
/// The longest varint of a count: a payload holds at most this many bytes per count.
const MAX_VARINT: u64 = 9;

/// Decode what [`encode_histogram`] wrote.
///
/// hdrhistogram's reader sizes its buffer to the payload length the data claims before it
/// reads a byte of the payload, so 4 bytes of a document could make it allocate 4 GiB. The
/// V2 bytes are inflated here first, no further than the histogram's parameters allow, and
/// the claimed length is checked against them and against what is there.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = shared::base64::decode(s).ok_or_else(|| "invalid base64".to_string())?;
    let v2 = plain_v2(&bytes)?;
    Deserializer::new()
        .deserialize(&mut v2.as_slice())
        .map_err(|e| format!("invalid histogram: {e}"))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The plain V2 form of `bytes` (inflated when compressed), its payload length checked.
fn plain_v2(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let short = || "invalid histogram: truncated header".to_string();
    match be32(bytes, 0).ok_or_else(short)? {
        V2_COOKIE => {
            let payload = checked_payload_len(bytes.get(4..).ok_or_else(short)?)?;
            if bytes.len() - 4 - V2_HEADER < payload {
                return Err(payload_missing(payload, bytes.len() - 4 - V2_HEADER));
            }
            Ok(bytes.to_vec())
        }
        V2_COMPRESSED_COOKIE => {
            let len = be32(bytes, 4).ok_or_else(short)? as usize;
            let deflated = bytes
                .get(8..8 + len)
                .ok_or_else(|| "invalid histogram: truncated compressed data".to_string())?;
            inflate_v2(deflated)
        }
        _ => Err("invalid histogram: not an HdrHistogram V2 encoding".into()),
    }
}

/// Inflate a compressed V2 histogram: its header, then no more payload than it claims, and
/// the claim checked against its parameters before anything is read for it.
fn inflate_v2(deflated: &[u8]) -> Result<Vec<u8>, String> {
    let mut z = flate2::read::ZlibDecoder::new(deflated);
    let mut v2 = vec![0u8; 4 + V2_HEADER];
    z.read_exact(&mut v2)
        .map_err(|e| format!("invalid histogram: header: {e}"))?;
    if be32(&v2, 0) != Some(V2_COOKIE) {
        return Err("invalid histogram: not an HdrHistogram V2 encoding inside".into());
    }
    let payload = checked_payload_len(&v2[4..])?;
    // `take` bounds the read; the vector grows with what is actually inflated.
    let got = z
        .take(payload as u64)
        .read_to_end(&mut v2)
        .map_err(|e| format!("invalid histogram: {e}"))?;
    if got < payload {
        return Err(payload_missing(payload, got));
    }
    Ok(v2)
}

fn payload_missing(claimed: usize, there: usize) -> String {
    format!("invalid histogram: its payload claims {claimed} bytes, {there} are there")
}

/// The payload length of a V2 header (after the cookie), refused when longer than the counts
/// its parameters allow could take.
fn checked_payload_len(header: &[u8]) -> Result<usize, String> {
    let short = || "invalid histogram: truncated header".to_string();
    if header.len() < V2_HEADER {
        return Err(short());
    }
    let payload = u64::from(be32(header, 0).ok_or_else(short)?);
    let digits = be32(header, 8).ok_or_else(short)?;
    let (low, high) = (
        be64(header, 12).ok_or_else(short)?,
        be64(header, 20).ok_or_else(short)?,
    );
    let counts = counts_len(low, high, digits)
        .ok_or_else(|| "invalid histogram: invalid parameters".to_string())?;
    if payload > counts * MAX_VARINT {
        return Err(format!(
            "invalid histogram: its payload claims {payload} bytes, more than its {counts} \
             counts can take"
        ));
    }
    Ok(payload as usize)
}

/// The length of the counts array of a histogram of these parameters (hdrhistogram's
/// `new_with_bounds`, without allocating it); `None` for parameters it refuses.
fn counts_len(low: u64, high: u64, digits: u32) -> Option<u64> {
    if !(1..=u64::MAX / 2).contains(&low) || high < 2 * low || digits > 5 {
        return None;
    }
    let largest = 2 * 10u32.pow(digits);
    // In floating point as hdrhistogram computes them: a `low` just under 2^63 rounds up.
    let sub_bucket_magnitude = f64::from(largest).log2().ceil() as u32;
    let unit_magnitude = (low as f64).log2().floor() as u32;
    if unit_magnitude + sub_bucket_magnitude > 63 {
        return None;
    }
    let mut untrackable = 1u64 << (unit_magnitude + sub_bucket_magnitude);
    let mut buckets = 1u64;
    while untrackable <= high {
        if untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) * (1u64 << (sub_bucket_magnitude - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trips() {
        let mut h = crate::stats::new_histogram();
        for v in [1, 10, 100, 1000, 10_000, 123_456] {
            h.record_n(v, 3).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        // Every recorded value with its count, not a summary of them.
        let recorded = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(recorded(&back), recorded(&h));
        assert_eq!(recorded(&h).len(), 6);
        assert_eq!(back.len(), h.len());
        assert!(decode_histogram("AAAA").is_err());
    }

    /// A V2 encoding of `h` (uncompressed) whose header claims `payload_len`.
    fn v2_claiming(h: &Histogram<u64>, payload_len: u32) -> Vec<u8> {
        let mut raw = Vec::new();
        hdrhistogram::serialization::V2Serializer::new()
            .serialize(h, &mut raw)
            .unwrap();
        raw[4..8].copy_from_slice(&payload_len.to_be_bytes());
        raw
    }

    fn deflated(raw: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(raw).unwrap();
        let comp = z.finish().unwrap();
        let mut out = 0x1c84_9314u32.to_be_bytes().to_vec();
        out.extend_from_slice(&(comp.len() as u32).to_be_bytes());
        out.extend_from_slice(&comp);
        out
    }

    #[test]
    fn a_payload_length_beyond_the_data_is_refused_before_any_allocation() {
        let mut h = crate::stats::new_histogram();
        h.record_n(1000, 5).unwrap();
        // Before: hdrhistogram's reader sized its buffer to the claimed 4 GiB and the process
        // aborted ("memory allocation of 4294967280 bytes failed").
        for claimed in [0xFFFF_FFF0, 1 << 20, 100] {
            let raw = v2_claiming(&h, claimed);
            for bytes in [deflated(&raw), raw] {
                let e = decode_histogram(&shared::base64::encode(&bytes)).unwrap_err();
                assert!(e.contains("payload"), "{claimed}: {e}");
            }
        }
        // Each form with its true length still reads.
        let mut true_len = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut true_len)
            .unwrap();
        let back = decode_histogram(&shared::base64::encode(&true_len)).unwrap();
        assert_eq!(back.len(), 5);
        let mut raw = Vec::new();
        hdrhistogram::serialization::V2Serializer::new()
            .serialize(&h, &mut raw)
            .unwrap();
        let back = decode_histogram(&shared::base64::encode(&raw)).unwrap();
        assert_eq!(back.len(), 5);
    }

    #[test]
    fn counts_len_is_hdrhistograms() {
        for (low, high, digits) in [
            (1, 2, 0),
            (1, crate::stats::HIST_MAX_US, 3),
            (1, crate::stats::HIST_MAX_US, 2),
            (1, u64::MAX, 5),
            (1000, u64::MAX, 1),
            (7, 1 << 40, 4),
            (1 << 40, u64::MAX, 2),
        ] {
            let h = Histogram::<u8>::new_with_bounds(low, high, digits as u8)
                .unwrap_or_else(|e| panic!("{low} {high} {digits}: {e:?}"));
            let want = h.distinct_values() as u64;
            assert_eq!(
                counts_len(low, high, digits),
                Some(want),
                "{low} {high} {digits}"
            );
        }
        for (low, high, digits) in [
            (0, 10, 3),
            (1, 1, 3),
            (1, 100, 6),
            (1 << 60, u64::MAX, 5),
            (u64::MAX / 2, u64::MAX, 0),
        ] {
            assert!(
                Histogram::<u8>::new_with_bounds(low, high, digits as u8).is_err(),
                "{low} {high} {digits}"
            );
            assert_eq!(counts_len(low, high, digits), None, "{low} {high} {digits}");
        }
    }
}
