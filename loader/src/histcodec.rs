//! Histograms as text: HdrHistogram's "V2 + DEFLATE" encoding in base64 (the form of
//! HdrHistogram's interval logs, `HISTF...`), shared by `--json`, `--hdr-log` and `loader merge`.

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

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

/// Decode what [`encode_histogram`] wrote.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = shared::base64::decode(s).ok_or_else(|| "invalid base64".to_string())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("invalid histogram: {e:?}"))
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
}
