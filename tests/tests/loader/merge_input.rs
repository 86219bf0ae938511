//! `loader merge` fed damaged documents: a real run's `--json` with one field changed. Each is
//! refused with one line naming the file and the field, exit 2: never a panic, an abort, an
//! allocation the document asks for, or a report of figures that wrapped.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The address space `loader merge` runs in here: far above what two small documents need,
/// far below what a document can claim.
const MERGE_ADDRESS_SPACE: u64 = 1 << 30;

/// A real `--shard 1/2 -n 20 --json` document (run once for the whole binary).
fn real_run() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let origin = tests::origin();
        let dir = tests::temp_dir("merge-input-real");
        let path = dir.join("real.json");
        let out = tests::process::Process::spawn(
            Command::new(tests::bin("loader"))
                .args(["--threads", "1", "--no-pin", "-q", "-n", "20", "-c", "2"])
                .args(["--shard", "1/2", "--json"])
                .arg(&path)
                .arg(origin.url("/"))
                .stdout(Stdio::piped()),
        )
        .output(Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
        let text = std::fs::read_to_string(&path).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// `doc` written to `dir/name`.
fn write(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(doc).unwrap()).unwrap();
    p
}

/// `loader merge FILES`, in a bounded address space.
fn merge(files: &[&Path]) -> Output {
    merge_within(files, MERGE_ADDRESS_SPACE)
}

/// `loader merge FILES` in an address space of `bytes`.
fn merge_within(files: &[&Path], bytes: u64) -> Output {
    let mut cmd = Command::new(tests::bin("loader"));
    cmd.arg("merge").args(files).stdout(Stdio::piped());
    tests::process::limit_address_space(&mut cmd, bytes);
    tests::process::Process::spawn(&mut cmd).output(Duration::from_secs(60))
}

/// Refused: exit 2, one line on stderr naming every one of `needles`, nothing on stdout.
fn assert_refused(out: &Output, needles: &[&str]) {
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{:?}\n{stderr}", out.status);
    for n in needles {
        assert!(stderr.contains(n), "no {n:?} in: {stderr}");
    }
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

/// `doc` with `f` applied, written as `name` beside a good second document; merged.
fn merge_changed(tag: &str, name: &str, f: impl FnOnce(&mut Value)) -> (Output, PathBuf) {
    let dir = tests::temp_dir(tag);
    let mut bad = real_run().clone();
    f(&mut bad);
    let bad = write(&dir, name, &bad);
    let mut good = real_run().clone();
    good["shard"]["index"] = 2.into();
    let good = write(&dir, "good.json", &good);
    (merge(&[&bad, &good]), bad)
}

/// A histogram that claims a payload of `len` bytes (V2, uncompressed: the reader trusts the
/// claim the same way in both forms).
fn histogram_claiming(len: u32) -> String {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    h.record_n(1000, 5).unwrap();
    let mut raw = Vec::new();
    hdrhistogram::serialization::Serializer::serialize(
        &mut hdrhistogram::serialization::V2Serializer::new(),
        &h,
        &mut raw,
    )
    .unwrap();
    raw[4..8].copy_from_slice(&len.to_be_bytes());
    shared::base64::encode(&raw)
}

#[test]
fn a_histogram_claiming_gigabytes_is_refused_without_allocating_them() {
    let (out, bad) = merge_changed("merge-input-hist", "hist.json", |d| {
        d["histograms"]["total"] = histogram_claiming(0xFFFF_FFF0).into();
    });
    assert_refused(&out, &[&bad.display().to_string(), "histogram 'total'"]);
}

#[test]
fn a_shard_out_of_its_bounds_is_refused() {
    for (index, count, field) in [
        (1, u64::from(u32::MAX), "shard.count"),
        (1, 100_000_000, "shard.count"),
        (7, 3, "shard.index"),
    ] {
        let (out, bad) = merge_changed("merge-input-shard", "shard.json", |d| {
            d["shard"]["index"] = index.into();
            d["shard"]["count"] = count.into();
        });
        assert_refused(&out, &[&bad.display().to_string(), field]);
    }
}

#[test]
fn a_time_beyond_the_clock_is_refused() {
    for key in ["started_unix", "ended_unix"] {
        let (out, bad) = merge_changed("merge-input-time", "time.json", |d| {
            d[key] = 1e19.into();
        });
        assert_refused(&out, &[&bad.display().to_string(), key]);
    }
}

/// Before, these were read as they were and summed with `+=`: 2^64-1 complete requests and a
/// second file's 10 printed "Complete requests: 9", 2^64-1 connections "Concurrency Level: 1",
/// a negative target rate "-100.00", a drain of 1e19 s its 20 digits.
#[test]
fn figures_beyond_their_bounds_are_refused() {
    let max = u64::MAX;
    let cases: [(&str, &str, Value); 8] = [
        ("totals", "completed", max.into()),
        ("options", "connections", max.into()),
        ("options", "workers", max.into()),
        ("rate", "target", (-100.0).into()),
        ("rate", "target", 1e308.into()),
        ("drain", "drain_s", 1e19.into()),
        ("drain", "drain_s", (-1.0).into()),
        ("shard", "duration_s", (-1.0).into()),
    ];
    for (object, key, value) in cases {
        let (out, bad) = merge_changed("merge-input-bounds", "bounds.json", |d| {
            // A run without --rate or -d has neither object: give it one.
            if d[object].is_null() {
                d[object] = serde_json::json!({});
            }
            d[object][key] = value.clone();
        });
        let field = format!("'{object}.{key}'");
        assert_refused(&out, &[&bad.display().to_string(), &field]);
    }
}

#[test]
fn sums_beyond_their_bounds_are_refused_naming_the_files() {
    let dir = tests::temp_dir("merge-input-sum");
    let mut doc = real_run().clone();
    doc["totals"]["completed"] = loader::json::MAX_COUNT.into();
    let a = write(&dir, "a.json", &doc);
    doc["shard"]["index"] = 2.into();
    let b = write(&dir, "b.json", &doc);
    let out = merge(&[&a, &b]);
    let (a, b) = (a.display().to_string(), b.display().to_string());
    assert_refused(&out, &[&a, &b, "'totals.completed'"]);
}

/// Before, an unsharded run given twice was merged as two: twice its requests, no warning.
#[test]
fn the_same_run_given_twice_is_refused() {
    let dir = tests::temp_dir("merge-input-twice");
    let mut doc = real_run().clone();
    doc["shard"] = Value::Null;
    let a = write(&dir, "u1.json", &doc);
    let out = merge(&[&a, &a]);
    assert_refused(&out, &[&a.display().to_string(), "counted twice"]);
}

/// Before: "invalid type: floating point `1.5`, expected u64", and no word of where.
#[test]
fn a_field_of_the_wrong_type_is_named_with_its_line() {
    let (out, bad) = merge_changed("merge-input-type", "type.json", |d| {
        d["totals"]["completed"] = 1.5.into();
    });
    let file = bad.display().to_string();
    assert_refused(&out, &[&file, "'totals.completed'", "line 1 column"]);
}

/// The runs are added one by one as they are read: merging a hundred takes the memory of a
/// few, not of a hundred (each run's histograms are ~1.5 MB decoded; before, every one was
/// kept to the end: 100 files, 159 MB resident).
#[test]
fn a_hundred_runs_merge_in_the_memory_of_a_few() {
    const RUNS: u32 = 100;
    let dir = tests::temp_dir("merge-input-many");
    let files: Vec<PathBuf> = (1..=RUNS)
        .map(|i| {
            let mut doc = real_run().clone();
            doc["shard"]["index"] = i.into();
            doc["shard"]["count"] = RUNS.into();
            write(&dir, &format!("{i}.json"), &doc)
        })
        .collect();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let out = merge_within(&refs, 64 << 20);
    let stdout = tests::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    let complete = real_run()["complete_requests"].as_u64().unwrap() * u64::from(RUNS);
    assert!(
        stdout.contains(&format!("Complete requests:      {complete}\n")),
        "{stdout}"
    );
}

/// Before: read until memory ran out ("out of memory" here, in a bounded address space).
#[test]
fn an_endless_document_is_refused_at_its_limit() {
    let out = merge(&[Path::new("/dev/zero")]);
    assert_refused(&out, &["/dev/zero", "MiB, the limit"]);
}

/// A document's exact sums are checked when read: a minimum above the maximum made the
/// report's clamp of a percentile panic ("min > max", exit 101), and a count beyond the
/// bound wrapped when added.
#[test]
fn exact_sums_out_of_order_or_bounds_are_refused() {
    let swapped = |d: &mut Value| {
        let s = &mut d["histograms"]["sums_us"]["total"];
        let (min, max) = (s["min_us"].clone(), s["max_us"].clone());
        assert!(min.as_u64().is_some() && max.as_u64().is_some(), "{s}");
        s["min_us"] = (max.as_u64().unwrap() + 1000).into();
        s["max_us"] = min;
    };
    let (out, _) = merge_changed("merge-input-sums", "swapped.json", swapped);
    assert_refused(&out, &["swapped.json", "histograms.sums_us.total"]);
    let huge = |d: &mut Value| d["histograms"]["sums_us"]["connect"]["count"] = u64::MAX.into();
    let (out, _) = merge_changed("merge-input-sums", "huge.json", huge);
    assert_refused(&out, &["huge.json", "histograms.sums_us.connect"]);
}
