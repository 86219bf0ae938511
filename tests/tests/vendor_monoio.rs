//! The vendored runtime is monoio 0.2.4 as published plus the numbered patches in
//! `vendor/patches/monoio/` (vendor/README.md lists them), nothing else: an edit made in
//! `vendor/monoio` without a patch fails here, with the difference printed as a patch.

use std::path::Path;
use std::process::Command;

#[test]
fn vendored_monoio_is_the_release_plus_its_patches() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(repo.join("scripts/vendor-monoio.sh"))
        .arg("check")
        .output()
        .expect("run scripts/vendor-monoio.sh check");
    assert!(
        out.status.success(),
        "scripts/vendor-monoio.sh check failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}
