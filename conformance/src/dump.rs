//! `--dump DIR`: every workload's inputs and outputs as `.npy` files.
//!
//! Layout: `DIR/<backend>/<workload>/<name>.npy` and `DIR/README.md`, which
//! says what each file holds. Arrays are C-ordered; float32 device outputs
//! stay float32 and references are float64.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;

/// A writable dump directory.
#[derive(Debug, Clone)]
pub struct Dump {
    root: PathBuf,
}

/// Why a dump directory cannot be used or a file cannot be written.
#[derive(Debug)]
pub struct DumpError {
    /// The path that failed.
    pub path: PathBuf,
    /// The underlying error.
    pub source: std::io::Error,
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write `{}`: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for DumpError {}

impl Dump {
    /// Creates `root` (and parents) and checks that a file can be written
    /// there. An existing `root` must be empty: a dump never overwrites a
    /// user's files.
    pub fn create(root: &Path) -> Result<Self, DumpError> {
        let fail = |source| DumpError { path: root.to_path_buf(), source };
        if let Ok(mut entries) = std::fs::read_dir(root)
            && entries.next().is_some()
        {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the folder exists and is not empty; give --dump a new or empty folder",
            )));
        }
        std::fs::create_dir_all(root).map_err(fail)?;
        let readme = root.join("README.md");
        std::fs::write(&readme, README).map_err(|source| DumpError { path: readme.clone(), source })?;
        Ok(Self { root: root.to_path_buf() })
    }

    /// Writes `data` with `shape` to `<backend>/<workload>/<name>.npy`.
    pub fn write<T: npyz::AutoSerialize + Copy>(
        &self,
        backend: &str,
        workload: &str,
        name: &str,
        shape: &[u64],
        data: &[T],
    ) -> Result<(), DumpError> {
        let dir = self.root.join(backend).join(workload);
        let path = dir.join(format!("{name}.npy"));
        let fail = |source| DumpError { path: path.clone(), source };
        std::fs::create_dir_all(&dir).map_err(fail)?;
        let file = BufWriter::new(File::create(&path).map_err(fail)?);
        let mut writer =
            npyz::WriteOptions::new().default_dtype().shape(shape).writer(file).begin_nd().map_err(fail)?;
        writer.extend(data.iter().copied()).map_err(fail)?;
        writer.finish().map_err(fail)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

const README: &str = "# hetero conformance dump

Arrays written by `conform --dump`, one folder per backend and workload:
`<backend>/<workload>/<name>.npy`. Load them with `numpy.load`. Inputs are
the same for every backend (same seed); `*_ref` arrays are the float64
sequential references the device results were checked against.

## reduce
- `input.npy` (float32, n): values summed. Each variant sums prefixes of
  lengths 0, 1, 1001 and n; the files hold the full-length case.
- `<variant>_sum.npy` (float32, 1): device sum; `sum_ref.npy` (float64, 1).

## scan
- `input.npy` (uint32, n): counts. `<variant>_offsets.npy` (uint32, n):
  exclusive prefix sums from the device; `offsets_ref.npy` (uint32, n),
  exact modulo 2^32 like the device.

## pull
- `constituents.npy` (float32, C x 3): pT, eta, phi of every constituent,
  jets' constituents consecutive. `jets.npy` (float32, J x 3): pT, eta, phi
  of every jet. `counts.npy` (uint32, J): constituents per jet.
  `events.npy` (uint32, E x 2): first jet and jet count of each event.
- `<variant>_pull.npy` (float32, J x 2): eta and phi components of each
  jet's pull vector; `pull_ref.npy` (float64, J x 2).

## wave
- `<variant>_snapshots.npy` (float32, S x ny x nx): wavefield after every
  `snapshot_every` steps; `snapshots_ref.npy` (float64, same shape).
- `source.npy` (float32, steps): Ricker wavelet value injected at each step.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_numpy_header() {
        let dir = std::env::temp_dir().join(format!("hetero-dump-test-{}", std::process::id()));
        let dump = Dump::create(&dir).unwrap();
        dump.write("host", "scan", "x", &[2, 2], &[1u32, 2, 3, 4]).unwrap();
        let bytes = std::fs::read(dir.join("host/scan/x.npy")).unwrap();
        assert_eq!(&bytes[..6], b"\x93NUMPY");
        let header = String::from_utf8_lossy(&bytes[10..bytes.len() - 16]);
        assert!(header.contains("'shape': (2, 2") && header.contains("<u4"), "{header}");
        assert_eq!(&bytes[bytes.len() - 16..], [1u32, 2, 3, 4].map(u32::to_le_bytes).concat());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
