//! Architecture invariants, checked as ordinary tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn library_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["crates/hetero/src", "kernels/src", "conformance/src"] {
        rust_files(&workspace().join(dir), &mut files);
    }
    files
}

/// Vendor crates and FFI appear only under `src/backend/`.
#[test]
fn vendor_crates_only_in_backends() {
    let vendor = ["opencl3", "cl3", "cudarc", "cubecl_hip_sys", "extern \"C\""];
    for file in library_sources() {
        if file.components().any(|c| c.as_os_str() == "backend") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for name in vendor {
            assert!(!text.contains(name), "{} names `{name}` outside src/backend/", file.display());
        }
    }
}

/// Library code never unwraps: a caller or driver must not be able to make it panic.
#[test]
fn no_unwrap_in_library_code() {
    for file in library_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for bad in [".unwrap()", ".expect(", "todo!(", "unimplemented!("] {
                assert!(!line.contains(bad), "{}:{}: `{bad}` in library code", file.display(), n + 1);
            }
        }
    }
}

/// Every `unsafe` block is preceded by a `// SAFETY:` comment.
#[test]
fn unsafe_blocks_have_safety_comments() {
    for file in library_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let opens_block = line.contains("unsafe {") && !line.trim_start().starts_with("//");
            if !opens_block {
                continue;
            }
            let window = &lines[n.saturating_sub(6)..=n];
            assert!(
                window.iter().any(|l| l.contains("SAFETY:")),
                "{}:{}: unsafe block without a `// SAFETY:` comment",
                file.display(),
                n + 1
            );
        }
    }
}

/// Every crate root starts with a `//!` doc comment.
#[test]
fn crate_roots_are_documented() {
    for root in ["crates/hetero/src/lib.rs", "kernels/src/lib.rs", "conformance/src/lib.rs", "xtask/src/main.rs"] {
        let text = std::fs::read_to_string(workspace().join(root)).unwrap();
        assert!(text.starts_with("//!"), "{root} has no crate doc");
    }
}

/// Every backend folder holds exactly the Rust files the table in
/// `src/backend/mod.rs` names for it (sub-folders, like the host's
/// kernels, are not counted).
#[test]
fn backend_folders_have_the_documented_file_names() {
    let backend = workspace().join("crates/hetero/src/backend");
    let doc = std::fs::read_to_string(backend.join("mod.rs")).unwrap();
    let mut checked = 0;
    for line in doc.lines().filter(|l| l.starts_with("//! | `")) {
        let cells: Vec<&str> = line.trim_start_matches("//! |").split('|').map(str::trim).collect();
        let folders = cells[0].split(',').map(|f| f.trim().trim_matches('`'));
        let mut expected: Vec<&str> = cells[1].trim_matches('`').split_whitespace().collect();
        expected.sort_unstable();
        for folder in folders {
            let mut found: Vec<String> = std::fs::read_dir(backend.join(folder))
                .unwrap_or_else(|e| panic!("backend folder `{folder}`: {e}"))
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            found.sort_unstable();
            assert_eq!(found, expected, "files of backend folder `{folder}`");
            checked += 1;
        }
    }
    let folders = std::fs::read_dir(&backend).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count();
    assert_eq!(checked, folders, "every backend folder is in the table of src/backend/mod.rs");
}
