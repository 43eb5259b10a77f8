//! `cargo xtask bench --help` answers from a copy of the tool's help kept
//! in xtask, so that it needs no build; the copy must stay what the tool prints.

#![allow(clippy::unwrap_used)] // tests fail loudly

#[test]
fn xtask_keeps_the_tools_help() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench")).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/help/bench.txt");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(path).unwrap(),
        "regenerate with `cargo run --release -p bench -- --help > xtask/help/bench.txt`"
    );
}
