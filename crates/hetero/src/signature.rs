//! Kernel signatures, parsed from the portable source's parameter lists,
//! and the check of a launch's arguments against them: the same check and
//! messages on every backend, before anything is enqueued.
//!
//! A pointer parameter (`GLOBAL [const] T* name`) takes a buffer view; one
//! without `const` may be written, so it takes a writable view (a kernel
//! writing memory passed read-only would race with other streams' reads,
//! which the tracker lets run alongside). A scalar parameter takes a scalar
//! of its C type. Element types are compared where both sides are C
//! scalar types (`float` and `f32`, `uint` and `u32`, ...); a buffer of a
//! user type matches any pointer.

/// One parameter of a kernel, as its declaration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    /// The parameter's name.
    pub(crate) name: String,
    /// Its C type, normalised (`uint`, `float`, ...); for a pointer, the
    /// element type.
    pub(crate) ty: String,
    /// A pointer: `Some(true)` when the kernel may write through it (no `const`).
    pub(crate) pointer: Option<bool>,
}

// The host backend checks registrations against these descriptions.
#[cfg_attr(not(feature = "host"), allow(dead_code))]
impl Param {
    /// The parameter as a sentence's object: "`GLOBAL const float* x`".
    pub(crate) fn describe(&self) -> String {
        match self.pointer {
            None => format!("`{} {}`", self.ty, self.name),
            Some(false) => format!("`GLOBAL const {}* {}`", self.ty, self.name),
            Some(true) => format!("`GLOBAL {}* {}`", self.ty, self.name),
        }
    }

    /// Whether its type (or element type) is a C scalar type rather than a user type.
    pub(crate) fn is_c_scalar(&self) -> bool {
        is_c_scalar(&self.ty)
    }
}

/// The parameters of declarations such as `GLOBAL const float* x` and
/// `uint n`; `None` when one cannot be read (then no launch is checked
/// beyond its argument count).
pub(crate) fn parse(declarations: &[String]) -> Option<Vec<Param>> {
    declarations.iter().map(|d| parse_one(d)).collect()
}

fn parse_one(declaration: &str) -> Option<Param> {
    let spaced = declaration.replace('*', " * ");
    let mut words: Vec<&str> = spaced.split_whitespace().collect();
    let name = words.pop()?.to_string();
    let stars = words.iter().filter(|w| **w == "*").count();
    if stars > 1 || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let constant = words.contains(&"const");
    let type_words: Vec<&str> =
        words.into_iter().filter(|w| !["*", "const", "GLOBAL", "restrict", "__restrict__"].contains(w)).collect();
    let ty = normalise(&type_words.join(" "))?;
    Some(Param { name, ty, pointer: (stars == 1).then_some(!constant) })
}

/// The dialect's name for a C scalar type, or the type as written for a
/// user type (a single identifier).
fn normalise(ty: &str) -> Option<String> {
    Some(
        match ty {
            "uint" | "unsigned int" | "unsigned" => "uint",
            "int" | "signed int" => "int",
            "float" => "float",
            "double" => "double",
            "ulong" | "unsigned long" | "unsigned long long" => "ulong",
            "long" | "long long" => "long",
            "ushort" | "unsigned short" => "ushort",
            "short" => "short",
            "uchar" | "unsigned char" => "uchar",
            "char" | "signed char" => "char",
            other if !other.is_empty() && other.chars().all(|c| c.is_alphanumeric() || c == '_') => other,
            _ => return None,
        }
        .to_string(),
    )
}

/// The dialect's name for the Rust element type `T`, when it is a C
/// scalar type; `None` for user types. Compares type ids, which the
/// compiler folds for each `T`: every launch asks this of every buffer.
pub(crate) fn c_name<T: 'static>() -> Option<&'static str> {
    use std::any::TypeId;
    let t = TypeId::of::<T>();
    let names = [
        (TypeId::of::<u32>(), "uint"),
        (TypeId::of::<i32>(), "int"),
        (TypeId::of::<f32>(), "float"),
        (TypeId::of::<f64>(), "double"),
        (TypeId::of::<u64>(), "ulong"),
        (TypeId::of::<i64>(), "long"),
        (TypeId::of::<u16>(), "ushort"),
        (TypeId::of::<i16>(), "short"),
        (TypeId::of::<u8>(), "uchar"),
        (TypeId::of::<i8>(), "char"),
    ];
    names.into_iter().find(|(id, _)| *id == t).map(|(_, name)| name)
}

/// What a launch passes for one parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Given {
    /// A buffer view: its element's C name (if a C scalar type) and
    /// whether the launch may write it.
    Buffer(Option<&'static str>, bool),
    /// A scalar of this C type, shown as `shown` in messages.
    Scalar(&'static str),
}

/// Why `given` does not fit parameter `index` (0-based) of `kernel`, if it does not.
#[inline]
pub(crate) fn mismatch(kernel: &str, index: usize, param: &Param, given: Given) -> Option<String> {
    // This runs for every argument of every launch: the quick check first,
    // and the reasons (which decide) only when it fails.
    if fits(param, given) { None } else { why(kernel, index, param, given) }
}

/// Whether `given` fits `param`: `true` only where [`why`] finds no
/// reason (`quick_check_agrees_with_the_reasons`).
#[inline]
fn fits(param: &Param, given: Given) -> bool {
    match (param.pointer, given) {
        (None, Given::Scalar(ty)) => ty == param.ty,
        (Some(written), Given::Buffer(elem, writable)) => elem.is_none_or(|e| e == param.ty) && (writable || !written),
        _ => false,
    }
}

/// The reason `given` does not fit parameter `index` of `kernel`, if any.
#[cold]
fn why(kernel: &str, index: usize, param: &Param, given: Given) -> Option<String> {
    let at = || format!("kernel `{kernel}` parameter {} (`{}`)", index + 1, param.name);
    match (param.pointer, given) {
        (None, Given::Buffer(..)) => {
            Some(format!("{} takes a {} scalar, but the launch passed a buffer", at(), param.ty))
        }
        (Some(_), Given::Scalar(ty)) => {
            Some(format!("{} takes a buffer of {}, but the launch passed a {ty} scalar", at(), param.ty))
        }
        (None, Given::Scalar(ty)) if ty != param.ty => Some(format!(
            "{} takes a {} scalar, but the launch passed a {ty} (convert it before the launch)",
            at(),
            param.ty
        )),
        (Some(_), Given::Buffer(Some(elem), _)) if elem != param.ty && is_c_scalar(&param.ty) => {
            Some(format!("{} points to {}, but the launch passed a buffer of {elem}", at(), param.ty))
        }
        (Some(true), Given::Buffer(_, false)) => Some(format!(
            "{} is written by the kernel (declared without `const`), but the launch passed a read-only slice; pass a writable one (`slice_mut`)",
            at()
        )),
        _ => None,
    }
}

/// Why a struct of Rust type `rust` (`size` bytes, aligned to `align`)
/// does not fit parameter `index` of `kernel`, if it does not; `layout` is
/// the size and alignment of the parameter's type where the source defines it.
pub(crate) fn struct_mismatch(
    kernel: &str,
    index: usize,
    param: &Param,
    (rust, size, align): (&str, usize, usize),
    layout: Option<(usize, usize)>,
) -> Option<String> {
    // Formatted only on a mismatch: this runs for every argument of every launch.
    let at = || format!("kernel `{kernel}` parameter {} (`{}`)", index + 1, param.name);
    if param.pointer.is_some() {
        return Some(format!("{} takes a buffer of {}, but the launch passed a struct `{rust}`", at(), param.ty));
    }
    if is_c_scalar(&param.ty) {
        return Some(format!("{} takes a {} scalar, but the launch passed a struct `{rust}`", at(), param.ty));
    }
    match layout {
        Some((want_size, want_align)) if (want_size, want_align) != (size, align) => Some(format!(
            "{} takes a `{}` of {want_size} bytes aligned to {want_align}, but the launch passed a `{rust}` of {size} bytes aligned to {align} (a field, its type or its order differs)",
            at(),
            param.ty
        )),
        Some(_) => None,
        // Never passed unchecked: the kernel would read past the value.
        None => Some(format!(
            "{} takes a `{}`, whose layout cannot be read from the source, so a struct passed for it cannot be checked; define `{}` in the source with fields of the dialect's scalar types, structs defined before it, or arrays of them",
            at(),
            param.ty,
            param.ty
        )),
    }
}

fn is_c_scalar(ty: &str) -> bool {
    ["uint", "int", "float", "double", "ulong", "long", "ushort", "short", "uchar", "char"].contains(&ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(d: &[&str]) -> Vec<String> {
        d.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn declarations_parse() {
        let params =
            parse(&decls(&["GLOBAL const float* in", "GLOBAL uint *out", "unsigned int n", "float a"])).unwrap();
        assert_eq!(params[0], Param { name: "in".into(), ty: "float".into(), pointer: Some(false) });
        assert_eq!(params[1], Param { name: "out".into(), ty: "uint".into(), pointer: Some(true) });
        assert_eq!(params[2], Param { name: "n".into(), ty: "uint".into(), pointer: None });
        assert_eq!(params[3].ty, "float");
        assert!(parse(&decls(&["GLOBAL float** x"])).is_none(), "pointers to pointers are not read");
    }

    /// Guards against a defect: `3u32` passed where the kernel takes
    /// `float a` reached the kernel as the float with those bits (4e-45).
    #[test]
    fn a_scalar_of_another_type_is_named() {
        let a = Param { name: "a".into(), ty: "float".into(), pointer: None };
        let why = mismatch("saxpy", 1, &a, Given::Scalar("uint")).unwrap();
        assert!(
            why.contains("saxpy") && why.contains("parameter 2 (`a`)") && why.contains("float") && why.contains("uint")
        );
        assert!(mismatch("saxpy", 1, &a, Given::Scalar("float")).is_none());
    }

    #[test]
    fn buffers_are_checked_for_kind_element_and_access() {
        let out = Param { name: "out".into(), ty: "float".into(), pointer: Some(true) };
        assert!(mismatch("k", 0, &out, Given::Scalar("float")).unwrap().contains("buffer of float"));
        assert!(mismatch("k", 0, &out, Given::Buffer(Some("uint"), true)).unwrap().contains("buffer of uint"));
        assert!(mismatch("k", 0, &out, Given::Buffer(Some("float"), false)).unwrap().contains("read-only"));
        assert!(mismatch("k", 0, &out, Given::Buffer(Some("float"), true)).is_none());
        assert!(mismatch("k", 0, &out, Given::Buffer(None, true)).is_none(), "a user type matches");
        let n = Param { name: "n".into(), ty: "uint".into(), pointer: None };
        assert!(mismatch("k", 2, &n, Given::Buffer(Some("uint"), false)).unwrap().contains("uint scalar"));
    }

    /// Guards the quick check of every launch argument: where it says an
    /// argument fits, the full check must find no reason against it, or a
    /// wrong argument would reach the kernel.
    #[test]
    fn quick_check_agrees_with_the_reasons() {
        for pointer in [None, Some(false), Some(true)] {
            for ty in ["float", "uint", "Particle"] {
                let param = Param { name: "p".into(), ty: ty.into(), pointer };
                let mut givens = vec![Given::Scalar("float"), Given::Scalar("uint")];
                for elem in [Some("float"), Some("uint"), None] {
                    givens.extend([Given::Buffer(elem, false), Given::Buffer(elem, true)]);
                }
                let exact = if pointer.is_some() { Given::Buffer(Some(ty), true) } else { Given::Scalar(ty) };
                if ty != "Particle" || pointer.is_some() {
                    assert!(fits(&param, exact), "the quick check takes {param:?} with {exact:?}");
                }
                for given in givens {
                    if fits(&param, given) {
                        assert_eq!(why("k", 0, &param, given), None, "{param:?} and {given:?}");
                    }
                }
            }
        }
    }

    /// Regression (wrong result): a struct parameter whose layout the
    /// source does not give was passed any value unchecked.
    #[test]
    fn a_struct_of_unknown_layout_is_refused() {
        let param = Param { name: "q".into(), ty: "Nested".into(), pointer: None };
        let why = struct_mismatch("sk", 1, &param, ("u32", 4, 4), None).expect("refused");
        assert!(why.contains("`Nested`") && why.contains("cannot be checked"), "{why}");
        assert!(struct_mismatch("sk", 1, &param, ("N", 24, 8), Some((24, 8))).is_none());
    }
}
