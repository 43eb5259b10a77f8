//! Report files that never destroy what a user had.
//!
//! A regular file (or a new path) is written to a temporary file beside it
//! and renamed into place only when complete, so a run that cannot start,
//! fails or is interrupted leaves an existing file as it was. A symbolic
//! link is followed: its target is replaced that way and the link stays.
//! Anything else (a FIFO, a character device, `/dev/stdout` and the other
//! names under `/dev` and `/proc`) is written in place, once, when the
//! report is complete, so a reader of a FIFO receives the report and a
//! write error (`/dev/full`) is reported with nothing replaced. The path
//! `-` means standard output (see [`STDOUT`]); it is written only when
//! complete, too.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The report path that means standard output. A tool given it for any
/// report prints its own table on standard error instead.
pub const STDOUT: &str = "-";

/// Symbolic links followed before giving up, as the kernel does (`ELOOP`).
const MAX_LINKS: usize = 40;

/// `true` when one of `paths` is [`STDOUT`].
pub fn any_stdout<'a>(paths: impl IntoIterator<Item = &'a Path>) -> bool {
    paths.into_iter().any(|p| p == Path::new(STDOUT))
}

/// Where a report goes and how it gets there.
#[derive(Debug)]
enum Dest {
    /// Standard output (`-`).
    Stdout,
    /// A regular file or a new path: `temp` is renamed over `target`.
    Replace { target: PathBuf, temp: PathBuf },
    /// Written in place when complete: a FIFO, a device, a name under
    /// `/dev` or `/proc`.
    InPlace { path: PathBuf },
}

/// What a destination path names once symbolic links are followed.
#[derive(Debug)]
enum Resolved {
    /// A regular file or nothing yet, at this path (links followed).
    File(PathBuf),
    /// Written in place.
    Special,
}

/// Follows `path`'s symbolic links, one hop at a time, to what it names.
/// A hop into `/dev` or `/proc` (where `/dev/stdout` leads) is written in
/// place; so is anything that exists and is neither a file nor a folder.
fn resolve(flag: &str, path: &Path) -> Result<Resolved, String> {
    let special = |p: &Path| p.starts_with("/dev") || p.starts_with("/proc");
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if special(&at) {
            return Ok(Resolved::Special);
        }
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&at)
                    .map_err(|e| format!("{flag}: cannot read the link `{}`: {e}", at.display()))?;
                at = match at.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(meta) if meta.is_dir() => {
                return Err(format!("{flag}: `{}` is a folder; name a file", path.display()));
            }
            Ok(meta) if meta.is_file() => return Ok(Resolved::File(at)),
            Ok(_) => return Ok(Resolved::Special),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Resolved::File(at)),
            Err(e) => return Err(format!("{flag}: cannot look at `{}`: {e}", at.display())),
        }
    }
    Err(format!("{flag}: `{}` goes through more than {MAX_LINKS} symbolic links", path.display()))
}

/// A report file being prepared. Dropping it without [`Output::commit`]
/// leaves the destination untouched. No temporary file exists until the
/// commit, so a run killed before it (a job's time limit) leaves nothing
/// behind: one created up front outlived every killed run.
#[derive(Debug)]
pub struct Output {
    flag: &'static str,
    path: PathBuf,
    dest: Dest,
}

impl Output {
    /// Prepares the report for `path` (named after the command-line `flag`
    /// in errors): for a file, creates and removes its temporary file,
    /// failing when the folder cannot be written.
    pub fn create(flag: &'static str, path: &Path) -> Result<Self, String> {
        let dest = if path == Path::new(STDOUT) {
            Dest::Stdout
        } else {
            match resolve(flag, path)? {
                Resolved::Special => Dest::InPlace { path: path.to_path_buf() },
                Resolved::File(target) => {
                    let name =
                        target.file_name().ok_or_else(|| format!("{flag}: `{}` names no file", path.display()))?;
                    let mut temp_name = std::ffi::OsString::from(".");
                    temp_name.push(name);
                    temp_name.push(format!(".{}.tmp", std::process::id()));
                    let temp = target.with_file_name(temp_name);
                    File::create_new(&temp).and_then(|_| std::fs::remove_file(&temp)).map_err(|e| {
                        format!("{flag}: cannot write beside `{}` ({}): {e}", target.display(), temp.display())
                    })?;
                    Dest::Replace { target, temp }
                }
            }
        };
        Ok(Self { flag, path: path.to_path_buf(), dest })
    }

    /// Writes `bytes`: renames a file into place, or writes in place.
    pub fn commit(mut self, bytes: &[u8]) -> Result<(), String> {
        let fail = |e: std::io::Error| format!("{}: cannot write `{}`: {e}", self.flag, self.path.display());
        match &mut self.dest {
            Dest::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("{}: cannot write to standard output: {e}", self.flag))
            }
            Dest::InPlace { path } => {
                // Appending: a FIFO or a device ignores it, and a file that
                // `/dev/stdout` leads to (a shell's `>` or `>>`) keeps what
                // the shell put there.
                let mut file = std::fs::OpenOptions::new().append(true).open(path).map_err(fail)?;
                file.write_all(bytes).and_then(|()| file.flush()).map_err(fail)
            }
            Dest::Replace { target, temp } => {
                let mut file = File::create_new(&*temp).map_err(fail)?;
                if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
                    drop(file);
                    let _ = std::fs::remove_file(&*temp);
                    return Err(fail(e));
                }
                drop(file);
                std::fs::rename(&*temp, &*target).map_err(|e| {
                    let _ = std::fs::remove_file(&*temp);
                    fail(e)
                })
            }
        }
    }
}

/// What two outputs must not share: the same file, however it is named
/// (a link, `.` or `..` in the path, another hard link).
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Stdout,
    /// An existing file: its device and inode.
    #[cfg(unix)]
    Inode(u64, u64),
    /// A path, canonical as far as it exists.
    Path(PathBuf),
}

fn identity(path: &Path) -> Identity {
    if path == Path::new(STDOUT) {
        return Identity::Stdout;
    }
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        return Identity::Inode(meta.dev(), meta.ino());
    }
    // A new file: its folder canonical (links in it followed), then its
    // name; a dangling link stands for the file it would create.
    let path = match resolve("", path) {
        Ok(Resolved::File(target)) => target,
        _ => path.to_path_buf(),
    };
    let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    match (absolute.parent().and_then(|d| std::fs::canonicalize(d).ok()), absolute.file_name()) {
        (Some(dir), Some(name)) => Identity::Path(dir.join(name)),
        _ => Identity::Path(absolute),
    }
}

/// Refuses two outputs that name the same file (they would overwrite each
/// other): the flags of the first pair found.
pub fn check_distinct(outputs: &[(&'static str, &Path)]) -> Result<(), String> {
    let keys: Vec<Identity> = outputs.iter().map(|(_, p)| identity(p)).collect();
    for (i, (flag_a, a)) in outputs.iter().enumerate() {
        for (j, (flag_b, b)) in outputs.iter().enumerate().skip(i + 1) {
            if keys[i] != keys[j] {
                continue;
            }
            return Err(if keys[i] == Identity::Stdout {
                format!("{flag_a} and {flag_b} both write to standard output (`-`); give one a file")
            } else if a == b {
                format!("{flag_a} and {flag_b} name the same file `{}`; give each its own", a.display())
            } else {
                format!(
                    "{flag_a} and {flag_b} name the same file (`{}` and `{}`); give each its own",
                    a.display(),
                    b.display()
                )
            });
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
        let pending = Output::create("--json", &path).unwrap();
        // A run killed now (never dropping `pending`) leaves no file behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file before the commit");
        drop(pending);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
        Output::create("--json", &path).unwrap().commit(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dash_is_standard_output_once() {
        let dash = Path::new(STDOUT);
        let out = Output::create("--json", dash).unwrap();
        assert!(matches!(out.dest, Dest::Stdout), "no file named `-` is created");
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
