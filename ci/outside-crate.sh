#!/usr/bin/env bash
# Builds and runs a crate outside the workspace against the README's
# dependency lines: the path line (this checkout next to the crate) and the
# git line (this checkout's committed HEAD as the repository address).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ln -s "$repo" "$scratch/hetero"

path_line=$(grep -m1 '^hetero = { path = ' README.md)
git_line=$(grep -m1 '^# hetero = { git = ' README.md | sed -e 's/^# //' -e "s|<repository address>|file://$repo|")

for kind in path git; do
  line=$path_line
  if [ "$kind" = git ]; then line=$git_line; fi
  crate="$scratch/user-$kind"
  mkdir -p "$crate/src"
  cat > "$crate/Cargo.toml" <<TOML
[package]
name = "user-$kind"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$line
TOML
  cat > "$crate/src/main.rs" <<'RUST'
use hetero::{Context, LaunchConfig};

fn main() -> hetero::Result<()> {
    let device = hetero::backend::host::HostDevice::new();
    let ctx = Context::new(device);
    let stream = ctx.stream()?;
    let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
    let mut x = ctx.alloc::<u32>(3)?;
    stream.copy_from_host(&[1, 2, 3], &mut x)?;
    {
        let xs = x.slice_mut(..)?;
        // SAFETY: affine_u32(x, n, a, b) touches x[0..n), and x holds n elements.
        let config = LaunchConfig::covering([3, 1, 1], [kernel.block_size(hetero::BlockRequest::new(64)), 1, 1], 0);
        unsafe { stream.launch(&kernel, config, &[(&xs).into(), 3u32.into(), 2u32.into(), 1u32.into()])? };
    }
    let mut out = [0u32; 3];
    stream.copy_to_host(&x, &mut out)?;
    assert_eq!(out, [3, 5, 7]);
    println!("ok: {out:?}");
    Ok(())
}
RUST
  echo "== outside crate, $kind line: $line"
  (cd "$crate" && CARGO_TARGET_DIR="$repo/target/outside" cargo run --quiet)
done
