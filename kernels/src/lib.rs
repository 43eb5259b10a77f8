//! Portable kernel sources, written once, compiled at run time by each backend.
//!
//! A kernel file uses a small dialect of C defined by a per-backend prelude,
//! so the same text compiles as OpenCL C (clBuildProgram) and as CUDA C++
//! (NVRTC, hiprtc):
//!
//! | macro | meaning |
//! |---|---|
//! | `KERNEL` | kernel entry point qualifier |
//! | `DEVICE_FN` | helper function callable from kernels |
//! | `GLOBAL` / `SHARED` | pointer address spaces: global memory, block-shared memory |
//! | `SHARED_PARAM(T, name)` | last parameter of a kernel that uses dynamic shared memory (written without a leading comma) |
//! | `SHARED_DECL(T, name)` | first statement of such a kernel; binds `SHARED T* name` |
//! | `THREAD_X/Y/Z`, `BLOCK_X/Y/Z`, `BLOCK_DIM_X/Y/Z`, `GRID_DIM_X/Y/Z` | thread and block indices and extents |
//! | `BARRIER` | block-wide barrier with shared-memory fence |
//! | `atomic_add_f32(GLOBAL float*, float)` | atomic float addition (a compare-and-swap loop on OpenCL 1.2) |
//! | `atomic_add_u32`, `atomic_add_i32`, `atomic_max_u32`, `atomic_min_u32` | 32-bit integer atomics on `GLOBAL` memory, returning the old value |
//! | `atomic_store_u32`, `atomic_load_u32` | words between blocks: a store every block sees whole, and a load from memory (volatile: never a value the thread cached) |
//! | `atomic_add_shared_u32(SHARED uint*, uint)` | 32-bit atomic addition on block-shared memory, returning the old value |
//! | `hetero_popc64(ulong)` | the bits set in a 64-bit word, as `uint` |
//! | `SHARED_ARRAY(T, name, count)` | a block-shared array declared inside a kernel |
//! | `HETERO_PI` | pi as a float literal |
//! | `uint`, `int`, `float`, `ulong`, `long`, `ushort`, `uchar` | scalar types, the same width on every backend (`long` is 64-bit) |
//! | `double` | 64-bit float, on devices whose `DeviceInfo::fp64` is set (the OpenCL prelude enables `cl_khr_fp64`; `HETERO_FP64` is defined) |
//! | `THREAD_LINEAR`, `BLOCK_THREADS` | the thread's index in its block over all dimensions (x fastest), and the block's thread count |
//! | `block_reduce_OP_S`, `block_inclusive_scan_OP_S`, `block_exclusive_scan_OP_S` (and `_items_` forms over several values per thread) | block collectives, `OP` one of `add`, `min`, `max`, `S` one of `u32`, `i32`, `u64`, `i64`, `f32`, `f64`; every thread calls them, in uniform control flow, with `BLOCK_THREADS` elements of shared scratch |
//! | `block_load_striped_S`, `block_store_striped_S`, `block_striped_to_blocked_S`, `block_blocked_to_striped_S`, `BLOCK_EXCHANGE_LEN` | block loads and stores of several items per thread, and exchanges between striped and blocked layouts |
//! | `HETERO_SUBGROUPS` | defined where the device has subgroups ([`SUBGROUP_WORDS`] need it) |
//! | `SUBGROUP_SIZE`, `SUBGROUP_LANE`, `SUBGROUP_ID`, `SUBGROUP_COUNT`, `SUBGROUP_LANES` | the device's subgroup width (warp or wavefront: 32 or 64), the thread's lane and subgroup, subgroups in the block, lanes of this thread's subgroup (fewer in a block's partial last one) |
//! | `sg_shuffle_S`, `sg_broadcast_S`, `sg_shuffle_up_S`, `sg_shuffle_down_S`, `sg_shuffle_xor_S` | values from other lanes of the subgroup |
//! | `sg_ballot`, `sg_any`, `sg_all` | votes over the subgroup (`sg_ballot` gives a `ulong` with one bit per lane) |
//! | `sg_reduce_OP_S`, `sg_inclusive_scan_OP_S`, `sg_exclusive_scan_OP_S` | subgroup collectives |
//!
//! The collectives are declared in `common.kern`, which says what each
//! takes; integer results are the same on every backend, with and without
//! subgroups.
//!
//! A kernel may take a struct by value: define it in the source with
//! scalar fields (`typedef struct { float a; uint n; } Params;`) and pass a
//! `#[repr(C)]` Rust struct with the same fields; launches check its size
//! and alignment against [`struct_layouts`].
//!
//! Rules for kernel bodies: no backend-specific names, `uint` for unsigned
//! 32-bit integers, no assumption about the warp or wavefront size (read
//! `SUBGROUP_SIZE`), and barriers and block collectives reached by every
//! thread of a block. A launcher passes dynamic
//! shared memory by byte count; OpenCL receives it as the trailing `__local`
//! argument, CUDA and HIP as `extern __shared__` memory.
//!
//! The host backend runs Rust implementations registered under the same
//! kernel names and parameter lists (hetero's `host_kernel` module);
//! [`kernel_names`] and [`kernel_params`] read a source's entry points so
//! every backend resolves and checks them the same way.

/// Sum of floats: `reduce_partial` (per-block sums) and `reduce_atomic`.
pub const REDUCE: &str = include_str!("portable/reduce.kern");
/// Exclusive prefix sum of u32: `scan_tile_sums` and `scan_tiles`.
pub const SCAN: &str = include_str!("portable/scan.kern");
/// Jet pull vectors, one block per jet: `pull_jets`, and `pull_jets_packed` over one packed buffer;
/// `pull_terms` writes each constituent's summands for a segmented sum instead.
pub const PULL: &str = include_str!("portable/pull.kern");
/// 2D wave equation time step with source injection: `wave_step`, and
/// `wave_rows` for a range of rows of it.
pub const WAVE: &str = include_str!("portable/wave.kern");
/// Rows of one column each `wave_step` thread computes (`WAVE_ROWS` in
/// `wave.kern`): a launch covers `ny` with `ceil(ny / WAVE_ROWS)` block rows
/// of height 1.
pub const WAVE_ROWS: u32 = 4;
/// Small element-wise kernels used by tests and examples: `affine_u32`.
pub const UTIL: &str = include_str!("portable/util.kern");
/// BabelStream's memory-bandwidth kernels: `stream_copy`, `stream_mul`,
/// `stream_add`, `stream_triad`, `stream_dot`.
pub const BANDWIDTH: &str = include_str!("portable/bandwidth.kern");
/// Elements each thread of `stream_copy`, `stream_mul`, `stream_add` and
/// `stream_triad` moves (`STREAM_PER_THREAD` in `bandwidth.kern`): a launch
/// covers `n` with `ceil(n / (STREAM_PER_THREAD * block))` blocks.
pub const STREAM_PER_THREAD: u32 = 4;

/// The device-wide algorithms of `hetero::algorithms` (`alg_reduce`,
/// `alg_segmented_reduce`, `alg_scan`), written once for every element
/// type on the collectives: not compiled as it stands, but per type and
/// operator, its placeholders replaced (see the file's head).
pub const ALGORITHMS: &str = include_str!("portable/algorithms.kern");
/// The deterministic sums and prefix sums of `hetero::algorithms`, a
/// template like [`ALGORITHMS`] for `float` and `double` (defining
/// `ALG_FIXED_ITEMS`), built with `hetero::BuildOptions::deterministic`.
pub const FIXED: &str = include_str!("portable/fixed.kern");
/// The radix sort of `hetero::algorithms` (`alg_sort_histogram`,
/// `alg_sort_offsets`, `alg_sort_pass`): a template per key and value
/// width (see the file's head).
pub const SORT: &str = include_str!("portable/sort.kern");
/// Histogram, select and the one-to-many association's preparation of
/// `hetero::algorithms` (`alg_histogram`, `alg_select`,
/// `alg_assoc_prepare`): a template per element type like [`ALGORITHMS`].
pub const SELECT: &str = include_str!("portable/select.kern");

/// Every portable source, by workload name.
pub const ALL: [(&str, &str); 6] =
    [("reduce", REDUCE), ("scan", SCAN), ("pull", PULL), ("wave", WAVE), ("bandwidth", BANDWIDTH), ("util", UTIL)];

/// Helpers every source may call (`block_sum`, and what the collectives
/// share); compiled after the prelude.
pub const COMMON: &str = include_str!("portable/common.kern");

/// The collectives' template, instantiated by [`collectives`].
pub const COLLECTIVES: &str = include_str!("portable/collectives.kern");

/// The operators of the collectives, as their names read in the dialect.
pub const COLLECTIVE_OPS: [&str; 3] = ["add", "min", "max"];

/// The combination of `a` and `b` by `op` (one of [`COLLECTIVE_OPS`]) for
/// the C type `ty`, as C: sums wrap for integers (signed ones are added as
/// unsigned, since signed overflow is undefined in C); min and max skip a
/// NaN in `a` (over a NaN in `b` they keep `a`), as `fmin`/`fmax` do from the
/// identity on.
pub fn combine(op: &str, ty: &str) -> String {
    let float = matches!(ty, "float" | "double");
    let nan = if float { " || a != a" } else { "" };
    match op {
        "add" if ty == "int" => "(int)((uint)a + (uint)b)".to_string(),
        "add" if ty == "long" => "(long)((ulong)a + (ulong)b)".to_string(),
        "add" => "a + b".to_string(),
        "min" => format!("(b < a{nan}) ? b : a"),
        _ => format!("(b > a{nan}) ? b : a"),
    }
}

/// The identity of `op` for the C type `ty`, as a C expression.
pub fn identity(op: &str, ty: &str) -> &'static str {
    match (op, ty) {
        ("add", "float") => "0.0f",
        ("add", "double") => "0.0",
        ("add", "uint") => "0u",
        ("add", "int") => "0",
        ("add", "ulong") => "(ulong)0",
        ("add", _) => "(long)0",
        ("min", "uint") => "0xffffffffu",
        ("min", "int") => "0x7fffffff",
        ("min", "ulong") => "(ulong)0xffffffffffffffffUL",
        ("min", "long") => "(long)0x7fffffffffffffffL",
        ("min", "float") => "HETERO_INF_F32",
        ("min", _) => "HETERO_INF_F64",
        (_, "uint") => "0u",
        (_, "int") => "(-0x7fffffff - 1)",
        (_, "ulong") => "(ulong)0",
        (_, "long") => "(-0x7fffffffffffffffL - 1L)",
        (_, "float") => "(-HETERO_INF_F32)",
        _ => "(-HETERO_INF_F64)",
    }
}

/// [`COLLECTIVES`] for every type and operator (the `double` ones where
/// `HETERO_FP64` is defined); [`assemble`] puts it after [`COMMON`].
pub fn collectives() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let marker = "/* ---- per operator ---- */";
        let (per_type, per_op) = COLLECTIVES.split_once(marker).unwrap_or((COLLECTIVES, ""));
        let mut out = String::new();
        for (suffix, ty) in COLLECTIVE_TYPES {
            let fp64 = ty == "double";
            if fp64 {
                out.push_str("#if defined(HETERO_FP64)\n");
            }
            out.push_str(&per_type.replace("$T", ty).replace("$S", suffix));
            for op in COLLECTIVE_OPS {
                out.push_str(
                    &per_op
                        .replace("$OP", op)
                        .replace("$ID", identity(op, ty))
                        .replace("$COMBINE", &combine(op, ty))
                        .replace("$T", ty)
                        .replace("$S", suffix),
                );
            }
            if fp64 {
                out.push_str("#endif\n");
            }
        }
        out
    })
}

/// Prelude that maps the dialect onto OpenCL C 1.2.
pub const PRELUDE_OPENCL: &str = include_str!("prelude/opencl.h");
/// Prelude that maps the dialect onto CUDA C++ (NVRTC) and HIP (hiprtc).
pub const PRELUDE_CUDA: &str = include_str!("prelude/cuda.h");

/// The suffixes of the element types the collectives take, with their C types.
pub const COLLECTIVE_TYPES: [(&str, &str); 6] =
    [("u32", "uint"), ("i32", "int"), ("u64", "ulong"), ("i64", "long"), ("f32", "float"), ("f64", "double")];

/// Words of the dialect that need subgroups (`HETERO_SUBGROUPS`): the
/// macros, and the functions before their type suffix (`sg_shuffle_` is
/// `sg_shuffle_u32` and its siblings).
pub const SUBGROUP_WORDS: [&str; 16] = [
    "SUBGROUP_SIZE",
    "SUBGROUP_LANE",
    "SUBGROUP_ID",
    "SUBGROUP_COUNT",
    "SUBGROUP_LANES",
    "sg_ballot",
    "sg_any",
    "sg_all",
    "sg_shuffle_",
    "sg_broadcast_",
    "sg_shuffle_up_",
    "sg_shuffle_down_",
    "sg_shuffle_xor_",
    "sg_reduce_",
    "sg_inclusive_scan_",
    "sg_exclusive_scan_",
];

/// The first subgroup word `source` uses outside comments, as written
/// (`sg_reduce_add_u32`), if any: what a device without subgroups cannot
/// compile.
pub fn subgroup_word(source: &str) -> Option<String> {
    let code = strip_comments(source);
    let mut words = code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty());
    words
        .find(|w| {
            SUBGROUP_WORDS.iter().any(|s| {
                if let Some(prefix) = s.strip_suffix('_') {
                    w.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('_')).is_some_and(|rest| {
                        // `sg_shuffle_u32`, or the longer words' suffixes (`sg_shuffle_up_u32`).
                        COLLECTIVE_TYPES.iter().any(|(t, _)| {
                            rest == *t || ["add_", "min_", "max_"].iter().any(|op| rest.strip_prefix(op) == Some(t))
                        })
                    })
                } else {
                    w == s
                }
            })
        })
        .map(str::to_string)
}

/// The full text a backend compiles: its prelude, [`COMMON`], then `source`.
pub fn assemble(prelude: &str, source: &str) -> String {
    format!("{prelude}\n{COMMON}\n{}\n#line 1\n{source}", collectives())
}

/// Names of the kernel entry points declared in `source`, in order of
/// appearance: every `KERNEL void <name>(` outside comments.
pub fn kernel_names(source: &str) -> Vec<String> {
    let code = strip_comments(source);
    let mut names = Vec::new();
    let mut rest = code.as_str();
    while let Some(pos) = rest.find("KERNEL") {
        let before = rest[..pos].chars().next_back().unwrap_or(' ');
        let after = &rest[pos + "KERNEL".len()..];
        let mut tokens = after.split_whitespace();
        if !is_ident(before) && tokens.next() == Some("void") {
            let name: String = tokens.next().unwrap_or("").chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
        rest = after;
    }
    names
}

/// Each kernel of `source` with its parameter declarations, in order
/// (e.g. `("affine_u32", ["GLOBAL uint* x", "uint n", ...])`). A
/// `SHARED_PARAM(...)` is not a parameter: launchers pass dynamic shared
/// memory by byte count. A kernel whose parameter list does not close is
/// left out.
pub fn kernel_params(source: &str) -> Vec<(String, Vec<String>)> {
    let code = strip_comments(source);
    let mut out = Vec::new();
    for name in kernel_names(source) {
        let Some(list) = param_list(&code, &name) else { continue };
        let mut params = Vec::new();
        let mut depth = 0usize;
        let mut current = String::new();
        for c in list.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if c == ',' && depth == 0 {
                params.push(std::mem::take(&mut current));
            } else {
                current.push(c);
            }
        }
        params.push(current);
        let params = params
            .iter()
            .map(|p| {
                // `uint n SHARED_PARAM(float, sh)`: the macro follows the last parameter.
                let p = p.find("SHARED_PARAM").map_or(p.as_str(), |at| &p[..at]);
                p.split_whitespace().collect::<Vec<_>>().join(" ")
            })
            .filter(|p| !p.is_empty() && p != "void")
            .collect();
        out.push((name, params));
    }
    out
}

/// The text between the parentheses of `KERNEL void name(...)` in comment-free `code`.
fn param_list<'a>(code: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = code;
    while let Some(pos) = rest.find(name) {
        let before = rest[..pos].trim_end();
        let after = rest[pos + name.len()..].trim_start();
        if before.ends_with("void")
            && before[..before.len() - 4].trim_end().ends_with("KERNEL")
            && after.starts_with('(')
        {
            let body = &after[1..];
            let mut depth = 1usize;
            for (i, c) in body.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(&body[..i]);
                        }
                    }
                    _ => {}
                }
            }
            return None;
        }
        rest = &rest[pos + name.len()..];
    }
    None
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Replaces `/* */` and `//` comments by spaces.
/// Size and alignment in bytes of the plain structs `source` defines
/// (`struct Name { ... };` or `typedef struct [Tag] { ... } Name;`, under
/// its tag and its name) whose fields are C scalar types of the dialect,
/// structs defined before it, or arrays of either, laid out by C's rules:
/// what a kernel receives for a struct passed by value. Structs with other
/// fields (pointers, unions, vector types, structs defined inside) are left
/// out, and a launch refuses to pass them.
pub fn struct_layouts(source: &str) -> Vec<(String, usize, usize)> {
    let code = strip_comments(source);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("struct") {
        let pos = from + found;
        from = pos + "struct".len();
        let (before, after) = (&code[..pos], &code[from..]);
        if before.chars().next_back().is_some_and(is_ident) || after.chars().next().is_some_and(is_ident) {
            continue;
        }
        let (Some(open), Some(close)) = (after.find('{'), after.find('}')) else { continue };
        if close < open {
            continue;
        }
        let tag = after[..open].trim();
        let names = if before.trim_end().ends_with("typedef") {
            [tag, after[close + 1..].split(';').next().unwrap_or("").trim()]
        } else {
            [tag, ""]
        };
        let Some((size, align)) = layout(&after[open + 1..close], &out) else { continue };
        for name in names {
            if !name.is_empty() && name.chars().all(is_ident) {
                out.push((name.to_string(), size, align));
            }
        }
    }
    out
}

/// C layout of the fields in `body` (`float a; uint n[4]; P inner;
/// struct P pair[2]; ...`), with `known` the structs defined before it.
fn layout(body: &str, known: &[(String, usize, usize)]) -> Option<(usize, usize)> {
    let (mut size, mut align) = (0usize, 1usize);
    for field in body.split(';').map(str::trim).filter(|f| !f.is_empty()) {
        let words: Vec<&str> = field.split_whitespace().collect();
        let (ty, names) = match words.as_slice() {
            ["unsigned", "int" | "long" | "short" | "char", ..] | ["long", "long", ..] | ["signed", ..] => {
                (words[..2].join(" "), words[2..].join(" "))
            }
            ["struct", ty, ..] => (ty.to_string(), words[2..].join(" ")),
            [ty, ..] => (ty.to_string(), words[1..].join(" ")),
            [] => return None,
        };
        let (width, field_align) = match ty.as_str() {
            "char" | "uchar" | "unsigned char" | "signed char" => (1, 1),
            "short" | "ushort" | "unsigned short" => (2, 2),
            "int" | "uint" | "unsigned int" | "float" | "signed int" => (4, 4),
            "long" | "ulong" | "unsigned long" | "long long" | "double" => (8, 8),
            other => known.iter().rev().find(|(n, ..)| n == other).map(|&(_, s, a)| (s, a))?,
        };
        if names.is_empty() {
            return None;
        }
        for name in names.split(',').map(str::trim) {
            let (ident, count) = match name.split_once('[') {
                Some((ident, n)) => (ident.trim(), n.strip_suffix(']')?.trim().parse::<usize>().ok()?),
                None => (name, 1),
            };
            if ident.is_empty() || !ident.chars().all(is_ident) {
                return None;
            }
            size = size.next_multiple_of(field_align) + width * count;
            align = align.max(field_align);
        }
    }
    (size > 0).then(|| (size.next_multiple_of(align), align))
}

/// `source` without comments and with every run of whitespace made one
/// space: two sources with equal normal forms compile to the same code.
/// The host backend runs a built-in kernel only for a source whose normal
/// form contains the built-in's whole file.
pub fn normal_form(source: &str) -> String {
    strip_comments(source).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                out.push(' ');
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_follow_c_rules() {
        let source = "typedef struct { float a; double b; uint n[3]; } Params;\n\
                      struct Pair { uchar tag; /* padding */ ushort v; };\n\
                      typedef struct Tagged { Params inner; uchar k; } Nested;\n\
                      typedef struct { struct Pair p[3]; Nested n; } Outer;\n\
                      typedef struct { GLOBAL float* x; } WithPointer;\n\
                      typedef struct { float2 v; } WithVector;\n\
                      typedef struct { WithVector w; } Unknown;";
        let layouts = struct_layouts(source);
        let expect = [("Params", 32, 8), ("Pair", 4, 2), ("Tagged", 40, 8), ("Nested", 40, 8), ("Outer", 56, 8)];
        let expect: Vec<_> = expect.into_iter().map(|(n, s, a)| (n.to_string(), s, a)).collect();
        assert_eq!(layouts, expect);
    }

    /// Regression (wrong result): a struct with a field of struct type had
    /// no layout, and the launch then passed any value unchecked.
    #[test]
    fn nested_struct_layouts_are_computed() {
        let source = "typedef struct { float scale; uint offset; ulong big; } P;\n\
                      typedef struct { P inner; uint k; } Nested;";
        let layouts = struct_layouts(source);
        assert!(layouts.contains(&("P".to_string(), 16, 8)), "{layouts:?}");
        assert!(layouts.contains(&("Nested".to_string(), 24, 8)), "{layouts:?}");
    }

    #[test]
    fn normal_forms_ignore_comments_and_spacing() {
        assert_eq!(normal_form("KERNEL  void k(uint n) // note\n{ }"), normal_form("KERNEL void k(uint n)\n{\n}"));
        assert_ne!(normal_form("x = a + b;"), normal_form("x = a - b;"));
    }

    #[test]
    fn stream_per_thread_matches_the_source() {
        // A launcher that divides by another count would leave elements
        // unwritten (or launch blocks that write nothing).
        assert!(BANDWIDTH.contains(&format!("#define STREAM_PER_THREAD {STREAM_PER_THREAD}\n")));
    }

    #[test]
    fn wave_rows_match_the_source() {
        // A launcher that covers ny with a different row count would leave
        // rows uncomputed (or compute past the grid's blocks).
        assert!(WAVE.contains(&format!("#define WAVE_ROWS {WAVE_ROWS}\n")), "wave.kern defines another WAVE_ROWS");
    }

    #[test]
    fn names_of_every_source() {
        let check = |src: &str, expect: &[&str]| assert_eq!(kernel_names(src), expect);
        check(REDUCE, &["reduce_partial", "reduce_atomic"]);
        check(SCAN, &["scan_tile_sums", "scan_tiles"]);
        check(PULL, &["pull_jets", "pull_jets_packed", "pull_terms"]);
        check(WAVE, &["wave_step", "wave_rows"]);
        check(UTIL, &["affine_u32"]);
        check(BANDWIDTH, &["stream_copy", "stream_mul", "stream_add", "stream_triad", "stream_dot"]);
    }

    #[test]
    fn parameter_lists() {
        let params = |src: &str| kernel_params(src).into_iter().map(|(n, p)| (n, p.len())).collect::<Vec<_>>();
        let counts = |src: &str| params(src).into_iter().map(|(_, c)| c).collect::<Vec<_>>();
        assert_eq!(counts(UTIL), [4]);
        assert_eq!(counts(REDUCE), [3, 3]);
        assert_eq!(kernel_params(UTIL)[0].1, ["GLOBAL uint* x", "uint n", "uint a", "uint b"]);
        assert_eq!(params("KERNEL void f(void) {}\nKERNEL  void g( ) {}"), [("f".into(), 0), ("g".into(), 0)]);
        assert_eq!(params("KERNEL void h(uint n SHARED_PARAM(float, sh)) {}"), [("h".into(), 1)]);
        assert_eq!(params("KERNEL void open(uint n"), []);
        for (_, src) in ALL {
            assert_eq!(kernel_params(src).len(), kernel_names(src).len());
        }
    }

    #[test]
    fn collectives_are_instantiated_for_every_type_and_operator() {
        let text = collectives();
        assert!(!text.contains('$'), "a placeholder is left");
        for (suffix, _) in COLLECTIVE_TYPES {
            assert!(text.contains(&format!("void block_store_striped_{suffix}(")));
            for op in COLLECTIVE_OPS {
                assert!(text.contains(&format!(" block_inclusive_scan_items_{op}_{suffix}(")), "{op} {suffix}");
                assert!(text.contains(&format!(" sg_reduce_{op}_{suffix}(")), "{op} {suffix}");
            }
        }
        assert!(text.contains("DEVICE_FN long hetero_add_i64(long a, long b) { return (long)((ulong)a + (ulong)b); }"));
        assert!(
            text.contains("DEVICE_FN float hetero_min_f32(float a, float b) { return (b < a || a != a) ? b : a; }")
        );
    }

    #[test]
    fn subgroup_words_are_found_outside_comments() {
        assert_eq!(subgroup_word("x = sg_reduce_add_u32(v);").as_deref(), Some("sg_reduce_add_u32"));
        assert_eq!(subgroup_word("y = sg_shuffle_up_f64(v, 1u);").as_deref(), Some("sg_shuffle_up_f64"));
        assert_eq!(subgroup_word("uint w = SUBGROUP_SIZE;").as_deref(), Some("SUBGROUP_SIZE"));
        assert_eq!(subgroup_word("if (sg_any(p)) {}").as_deref(), Some("sg_any"));
        assert_eq!(subgroup_word("/* sg_any(p) */ block_reduce_add_u32(s, v); // SUBGROUP_SIZE"), None);
        // Names that merely start like a word are not words.
        assert_eq!(subgroup_word("uint sg_anything = my_sg_any; sg_shuffle_total = 1;"), None);
        assert_eq!(subgroup_word("#ifdef HETERO_SUBGROUPS\n#endif"), None);
    }

    #[test]
    fn commented_out_kernels_are_not_names() {
        let src =
            "// KERNEL void a(uint n)\n/* KERNEL void b(uint n) */\nKERNEL void c(uint n) {}\nMYKERNEL void d() {}";
        assert_eq!(kernel_names(src), ["c"]);
    }
}
