//! Compiles every kernel of the project, built-in, example and test, with
//! ROCm's hiprtc for AMD GPU targets, without a GPU:
//!
//!     cargo xtask hip-compile --arch gfx908,gfx90a,gfx1030
//!
//! One line per kernel file and target; exit 0 when all compiled, 1 when
//! one failed (its hiprtc log is printed), 2 when the arguments are wrong
//! or no hiprtc could be loaded. Kernels a test means to fail to build
//! are not here. Each compilation runs in a process of its own: ROCm
//! 5.2's hiprtc aborts the process (`munmap_chunk(): invalid pointer`) on
//! a target it does not know, such as gfx1100, which is reported as that
//! compilation's failure.

use std::process::ExitCode;

/// The example's and the tests' kernel files, by path in the repository.
const FILES: [(&str, &str); 6] = [
    ("examples/custom-kernel/src/kernels.kern", include_str!("../../../examples/custom-kernel/src/kernels.kern")),
    ("crates/hetero/tests/kernels/dialect.kern", include_str!("../tests/kernels/dialect.kern")),
    ("crates/hetero/tests/kernels/user.kern", include_str!("../tests/kernels/user.kern")),
    ("crates/hetero/tests/kernels/user_f64.kern", include_str!("../tests/kernels/user_f64.kern")),
    ("crates/hetero/tests/kernels/nested.kern", include_str!("../tests/kernels/nested.kern")),
    ("crates/hetero/tests/kernels/strict.kern", include_str!("../tests/kernels/strict.kern")),
];

/// The targets of `--arch a,b,c` (or `--arch=a,b,c`), or what is wrong.
fn targets(args: &[String]) -> Result<Vec<String>, String> {
    let value = match args {
        [flag, value] if flag == "--arch" => value.clone(),
        [flag] if flag.starts_with("--arch=") => flag["--arch=".len()..].to_string(),
        _ => return Err("usage: hip-compile --arch gfx908,gfx90a,gfx1030".into()),
    };
    let targets: Vec<String> = value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
    match targets.iter().find(|t| !t.starts_with("gfx") || !t[3..].chars().all(|c| c.is_ascii_alphanumeric())) {
        _ if targets.is_empty() => Err("--arch names no target (expected e.g. gfx90a)".into()),
        Some(bad) => {
            Err(format!("{bad:?} is not an AMD GPU target (expected gfx followed by letters and digits, e.g. gfx90a)"))
        }
        None => Ok(targets),
    }
}

/// Every kernel file: the built-in ones, then [`FILES`], then every
/// instantiation of the algorithms' generic source; each once as it is
/// built by default and once as a deterministic build (`HETERO_DETERMINISTIC`
/// and strict floating point: `hetero::BuildOptions`).
fn files() -> Vec<(String, String, hetero::BuildOptions)> {
    let sources: Vec<(String, String)> = hetero::kernels::ALL
        .iter()
        .chain(FILES.iter())
        .map(|(name, source)| (name.to_string(), source.to_string()))
        .chain(hetero::algorithms::kernel_sources())
        .collect();
    let deterministic = hetero::BuildOptions::deterministic();
    let plain = sources.iter().map(|(name, source)| (name.clone(), source.clone(), hetero::BuildOptions::default()));
    let strict =
        sources.iter().map(|(name, source)| (format!("{name} (deterministic)"), source.clone(), deterministic));
    plain.chain(strict).collect()
}

/// `--one TARGET INDEX`: compiles one file for one target in this process
/// (exit 0, 1 with the log, or 2 when hiprtc cannot be loaded).
fn one(target: &str, index: &str) -> ExitCode {
    let Some((_, source, options)) = index.parse::<usize>().ok().and_then(|i| files().into_iter().nth(i)) else {
        return ExitCode::from(2);
    };
    match hetero::backend::hip::compile_for_target(&source, target, &options) {
        Ok(bytes) => {
            println!("{bytes}");
            ExitCode::SUCCESS
        }
        Err(e) if e.kind == hetero::ErrorKind::Unavailable => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            println!("{}", e.message);
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, target, index] = args.as_slice()
        && flag == "--one"
    {
        return one(target, index);
    }
    let targets = match targets(&args) {
        Ok(targets) => targets,
        Err(why) => {
            eprintln!("hip-compile: {why}");
            return ExitCode::from(2);
        }
    };
    let Ok(me) = std::env::current_exe() else {
        eprintln!("hip-compile: cannot find its own executable to run each compilation");
        return ExitCode::from(2);
    };
    let mut failed = 0;
    for (index, (name, _, _)) in files().into_iter().enumerate() {
        for target in &targets {
            let run = std::process::Command::new(&me).args(["--one", target, &index.to_string()]).output();
            let Ok(run) = run else {
                eprintln!("hip-compile: cannot start {}", me.display());
                return ExitCode::from(2);
            };
            let out = String::from_utf8_lossy(&run.stdout);
            match run.status.code() {
                Some(0) => println!("{target}  {name}: ok, {} bytes of code object", out.trim()),
                Some(2) => {
                    eprintln!("hip-compile: {}", String::from_utf8_lossy(&run.stderr).trim());
                    return ExitCode::from(2);
                }
                Some(_) => {
                    failed += 1;
                    println!("{target}  {name}: FAILED\n{}", out.trim_end());
                }
                None => {
                    failed += 1;
                    let err = String::from_utf8_lossy(&run.stderr);
                    println!(
                        "{target}  {name}: FAILED: hiprtc ended the process ({}); a hiprtc older than the target does that",
                        err.trim()
                    );
                }
            }
        }
    }
    if failed > 0 {
        println!("{failed} compilations failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
