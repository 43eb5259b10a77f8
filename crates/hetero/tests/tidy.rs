//! Architecture invariants, checked as ordinary tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::collections::{BTreeMap, BTreeSet};
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

/// Vendor crates and FFI appear only under `src/backend/`, except the FFI
/// of profilers' marker libraries, all of it in `src/markers.rs`, and
/// DLPack's C deleter, in `src/dlpack.rs`.
#[test]
fn vendor_crates_only_in_backends() {
    let vendor = ["opencl3", "cl3", "cudarc", "cubecl_hip_sys", "extern \"C\""];
    let c_abi = ["crates/hetero/src/markers.rs", "crates/hetero/src/dlpack.rs"].map(|f| workspace().join(f));
    for file in library_sources() {
        if file.components().any(|c| c.as_os_str() == "backend") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for name in vendor {
            if c_abi.contains(&file) && name == "extern \"C\"" {
                continue;
            }
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

/// A source file without its comments and its `#[cfg(test)]` items (what
/// the library itself imports, not what its unit tests do).
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect();
    let mut code = lines.join("\n");
    while let Some(at) = code.find("#[cfg(test)]") {
        // The item after the attribute ends at its closing brace (or `;`).
        let rest = &code[at..];
        let (mut depth, mut end) = (0usize, rest.len());
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    end = i + 1;
                    break;
                }
                '}' => depth = depth.saturating_sub(1),
                ';' if depth == 0 && i > "#[cfg(test)]".len() => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        code.replace_range(at..at + end, "");
    }
    code
}

/// The paths a piece of code names after `prefix` (`crate::` or `super::`):
/// each as its segments, a `{a, b::c}` group giving one path per member.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        if code[..at].chars().next_back().is_some_and(ident) {
            continue; // e.g. `hetero_crate::`
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for member in inner.split(',') {
                let segments: Vec<String> =
                    member.trim().split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                if !segments.is_empty() {
                    found.push(segments);
                }
            }
        } else {
            let end = rest.find(|c: char| !(ident(c) || c == ':')).unwrap_or(rest.len());
            let segments: Vec<String> = rest[..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            if !segments.is_empty() {
                found.push(segments);
            }
        }
    }
    found
}

/// Which module of a crate imports which: nodes are the module files under
/// `src` (`a/b.rs` is `a/b`, `a/mod.rs` is `a`), cut to their first
/// `depth` components; edges come from `crate::` and `super::` paths
/// (names re-exported at the crate root are followed to their module),
/// comments and test modules left out. The crate root and binaries are
/// not nodes.
fn import_graph(src: &Path, depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |path: &Path| -> String {
        let relative = path.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        parts.join("/")
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let cut = |module: &str| module.split('/').take(depth).collect::<Vec<_>>().join("/");
    // Names the crate root re-exports (`pub use module::{A, b};`), by module.
    let root =
        std::fs::read_to_string(src.join("lib.rs")).or_else(|_| std::fs::read_to_string(src.join("main.rs"))).unwrap();
    let mut reexported = BTreeMap::new();
    for line in code_of(&root).split(';') {
        let Some(used) = line.trim().strip_prefix("pub use ") else { continue };
        let Some((module, names)) = used.split_once("::") else { continue };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            reexported.insert(name.trim().to_string(), module.trim().to_string());
        }
    }
    let resolve = |segments: &[String]| -> Option<String> {
        (1..=segments.len())
            .rev()
            .map(|n| segments[..n].join("/"))
            .find(|candidate| modules.contains(candidate))
            .or_else(|| reexported.get(&segments[0]).cloned())
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        if module == "lib" || module == "main" || module.starts_with("bin/") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let parent: Vec<String> = {
            let mut parts: Vec<String> = module.split('/').map(str::to_string).collect();
            parts.pop();
            parts
        };
        let named = paths_after(&code, "crate::")
            .into_iter()
            .chain(paths_after(&code, "super::").into_iter().map(|p| parent.iter().cloned().chain(p).collect()));
        let targets: BTreeSet<String> =
            named.filter_map(|p| resolve(&p).or_else(|| (!parent.is_empty()).then(|| parent.join("/")))).collect();
        let from = cut(&module);
        let entry = graph.entry(from.clone()).or_default();
        entry.extend(targets.iter().map(|t| cut(t)).filter(|t| *t != from));
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].iter().cloned().chain([node.to_string()]).collect());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The library's layers hold as imports: each module imports only modules
/// of lower layers (ARCHITECTURE.md, "Architecture invariants"). The trait
/// named every backend (for enum_dispatch), errors named the trait's
/// module, and block sizes and the trait named each other.
#[test]
fn library_layers_hold_as_imports() {
    let layers: [&[&str]; 11] = [
        &["sync"],
        &["types", "signature", "shard", "markers", "ops", "foreign"],
        &["error"],
        &["host_kernel"],
        &["device"],
        &["block", "select", "faults"],
        &["backend"],
        &["any"],
        &["safe"],
        &["algorithms", "dlpack"],
        &["testing"],
    ];
    let graph = import_graph(&workspace().join("crates/hetero/src"), 1);
    assert_imports_go_down(&graph, &layers, "");
}

/// Every module of `graph` imports only modules of lower `layers` (each a
/// list of module names below `prefix`), and none in a circle.
fn assert_imports_go_down(graph: &BTreeMap<String, BTreeSet<String>>, layers: &[&[&str]], prefix: &str) {
    let layer = |m: &str| layers.iter().position(|l| l.iter().any(|name| m == format!("{prefix}{name}")));
    assert_eq!(cycle(graph), None, "{graph:?}");
    for (from, targets) in graph {
        let rank = layer(from).unwrap_or_else(|| panic!("module `{from}` has no layer in this test"));
        for to in targets {
            let below = layer(to).unwrap_or_else(|| panic!("`{from}` imports `{to}`, which has no layer"));
            assert!(below < rank, "`{from}` (layer {rank}) imports `{to}` (layer {below}): imports go down only");
        }
    }
}

/// The typed layer's files import only downwards, floor by floor: plain
/// data at the ground (tracking marks; the allocator's blocks and options
/// and the waiter's queue over them), then the per-device state,
/// the tracker, behaviour over the state (allocation, completion), buffers,
/// launch arguments and events, modules, streams, the work that spans
/// streams and devices (peer copies, graphs), the context, and at the top
/// what adopts other libraries' memory and streams into it
/// (ARCHITECTURE.md). The files were one import circle: the ground file
/// imported the allocator, the waiter and the peer bridges, the top floor.
#[test]
fn typed_layer_floors_hold_as_imports() {
    let floors: [&[&str]; 12] = [
        &["marks", "gates"],
        &["cache", "waiter"],
        &["state"],
        &["tracker"],
        &["alloc", "completion"],
        &["buffer"],
        &["args", "event"],
        &["module"],
        &["stream"],
        &["peer", "graph"],
        &["context"],
        &["foreign"],
    ];
    let graph = import_graph(&workspace().join("crates/hetero/src"), 2);
    let typed_layer: BTreeMap<String, BTreeSet<String>> = graph
        .iter()
        .filter(|(m, _)| m.starts_with("safe/"))
        .map(|(m, targets)| (m.clone(), targets.iter().filter(|t| t.starts_with("safe/")).cloned().collect()))
        .collect();
    assert_imports_go_down(&typed_layer, &floors, "safe/");
}

/// No file of the workspace's crates imports in a circle, at any depth
/// (the bench's peer medians and the vendor-call files, the GPU wing's
/// device and graphs, its modules and runtime, OpenCL's events and
/// streams each imported each other).
#[test]
fn no_files_import_in_a_circle() {
    for src in ["crates/hetero/src", "conformance/src", "bench/src", "xtask/src", "kernels/src"] {
        let graph = import_graph(&workspace().join(src), usize::MAX);
        assert_eq!(cycle(&graph), None, "{src}");
    }
}

/// The conformance suite's files import in no circle, and its report
/// formats are leaves over the report model: none imports another, and the
/// model imports none (the model imported the HTML page for its images,
/// the timeline the report for the trace, the library comparison the
/// report and back).
#[test]
fn conformance_report_model_has_leaf_renderers() {
    let graph = import_graph(&workspace().join("conformance/src"), 2);
    assert_eq!(cycle(&graph), None, "{graph:?}");
    let leaves = ["html", "markdown", "junit", "table", "trace"];
    for (from, targets) in &graph {
        let formats: Vec<&String> = targets.iter().filter(|t| leaves.contains(&t.as_str())).collect();
        assert!(formats.is_empty(), "`{from}` imports the report formats {formats:?}: formats are leaves");
    }
    for module in leaves.iter().chain(&["report", "workloads", "document", "timeline", "image"]) {
        assert!(graph.contains_key(*module), "no module `{module}` in {graph:?}");
    }
}

/// Every relative link in the project's Markdown (README, ARCHITECTURE,
/// docs and their results, experiments, CI notes, examples) names a file
/// or folder that exists: the README once cited results that had moved.
#[test]
fn markdown_links_resolve() {
    fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() && !name.starts_with('.') && name != "target" && name != "node_modules" {
                markdown_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") && !path.is_symlink() {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    markdown_files(&workspace(), &mut files);
    assert!(files.len() > 10, "{files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            let path = target.split('#').next().unwrap_or("").trim();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") || path.contains(' ') {
                continue;
            }
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(workspace()).unwrap_or(file).display()));
            }
        }
    }
    assert!(broken.is_empty(), "links that resolve to nothing:\n{}", broken.join("\n"));
}

/// The HIP-on-NVIDIA harness exports every function the HIP backend
/// resolves: the backend resolves them all at load, so one missing from
/// the harness makes HIP unavailable on the GPU machine (as
/// `hipRuntimeGetVersion`, added to the backend's table, would have).
#[test]
fn the_hip_harness_exports_every_function_the_backend_resolves() {
    let read = |path: &str| std::fs::read_to_string(workspace().join(path)).unwrap();
    let (table, harness) = (read("crates/hetero/src/backend/hip/ffi.rs"), read("ci/hip-nvidia/wrapper.cpp"));
    let start = table.find("functions! {").expect("the table of functions");
    let resolved: Vec<&str> = table[start..]
        .lines()
        .skip(1)
        .take_while(|l| *l != "}")
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.starts_with("hip"))
        .filter_map(|l| l.split('(').next())
        .collect();
    assert!(resolved.len() > 40, "{resolved:?}");
    let missing: Vec<&&str> = resolved.iter().filter(|name| !harness.contains(&format!(" hetero_{name}("))).collect();
    assert!(missing.is_empty(), "ci/hip-nvidia/wrapper.cpp does not export {missing:?}");
}
