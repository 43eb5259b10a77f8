//! Report files that never destroy what a user had: each is written to a
//! temporary file beside its destination and renamed into place only when
//! complete, so a run that cannot start, fails or is interrupted leaves an
//! existing file as it was. The path `-` means standard output (see
//! [`STDOUT`]); it is written only when complete, too.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The report path that means standard output. A tool given it for any
/// report prints its own table on standard error instead.
pub const STDOUT: &str = "-";

/// `true` when one of `paths` is [`STDOUT`].
pub fn any_stdout<'a>(paths: impl IntoIterator<Item = &'a Path>) -> bool {
    paths.into_iter().any(|p| p == Path::new(STDOUT))
}

/// A report file being prepared. Dropping it without [`Output::commit`]
/// removes the temporary file and leaves the destination untouched.
#[derive(Debug)]
pub struct Output {
    flag: &'static str,
    path: PathBuf,
    temp: PathBuf,
    /// `None` once written, and for standard output.
    file: Option<File>,
    stdout: bool,
}

impl Output {
    /// Creates the temporary file for `path` (named after the command-line
    /// `flag` in errors); fails when its folder cannot be written.
    pub fn create(flag: &'static str, path: &Path) -> Result<Self, String> {
        if path == Path::new(STDOUT) {
            return Ok(Self { flag, path: path.to_path_buf(), temp: PathBuf::new(), file: None, stdout: true });
        }
        let name = path.file_name().ok_or_else(|| format!("{flag}: `{}` names no file", path.display()))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".{}.tmp", std::process::id()));
        let temp = path.with_file_name(temp_name);
        let file = File::create_new(&temp)
            .map_err(|e| format!("{flag}: cannot write beside `{}` ({}): {e}", path.display(), temp.display()))?;
        Ok(Self { flag, path: path.to_path_buf(), temp, file: Some(file), stdout: false })
    }

    /// Writes `bytes` and renames the file into place.
    pub fn commit(mut self, bytes: &[u8]) -> Result<(), String> {
        if self.stdout {
            let mut out = std::io::stdout().lock();
            return out
                .write_all(bytes)
                .and_then(|()| out.flush())
                .map_err(|e| format!("{}: cannot write to standard output: {e}", self.flag));
        }
        let fail = |e: std::io::Error| format!("{}: cannot write `{}`: {e}", self.flag, self.path.display());
        let mut file = self.file.take().ok_or_else(|| fail(std::io::Error::other("already written")))?;
        file.write_all(bytes).and_then(|()| file.sync_all()).map_err(fail)?;
        drop(file);
        std::fs::rename(&self.temp, &self.path).map_err(fail)
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Refuses two outputs that name the same file (they would overwrite each
/// other): the flags of the first pair found.
pub fn check_distinct(outputs: &[(&'static str, &Path)]) -> Result<(), String> {
    let key = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    for (i, (flag_a, a)) in outputs.iter().enumerate() {
        for (flag_b, b) in &outputs[i + 1..] {
            if *a == Path::new(STDOUT) && *b == Path::new(STDOUT) {
                return Err(format!("{flag_a} and {flag_b} both write to standard output (`-`); give one a file"));
            }
            if key(a) == key(b) {
                return Err(format!("{flag_a} and {flag_b} name the same file `{}`; give each its own", a.display()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncommitted_output_leaves_the_file_alone() {
        let dir = std::env::temp_dir().join(format!("conform-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        std::fs::write(&path, "keep me").unwrap();
        drop(Output::create("--json", &path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the temporary file is removed");
        Output::create("--json", &path).unwrap().commit(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dash_is_standard_output_once() {
        let dash = Path::new(STDOUT);
        let out = Output::create("--json", dash).unwrap();
        assert!(out.stdout && out.file.is_none(), "no file named `-` is created");
        assert!(!Path::new("-").exists() || Path::new("-").is_dir());
        let err = check_distinct(&[("--json", dash), ("--markdown", dash)]).unwrap_err();
        assert!(err.contains("standard output"), "{err}");
        assert!(any_stdout([Path::new("a.json"), dash]));
    }

    #[test]
    fn same_file_twice_is_refused() {
        let (a, b) = (Path::new("out/r.json"), Path::new("out/./r.json"));
        let err = check_distinct(&[("--json", a), ("--junit", b)]).unwrap_err();
        assert!(err.contains("--json") && err.contains("--junit"), "{err}");
        assert!(check_distinct(&[("--json", a), ("--junit", Path::new("out/r.xml"))]).is_ok());
    }
}
