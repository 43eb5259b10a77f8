//! The dialect's collectives, every word × type × operator, against a
//! sequential reference, on every backend: block collectives everywhere
//! (through subgroups where the device has them, through shared memory
//! where not, through `Block`'s collectives on the host), subgroup words
//! where the device has subgroups, and the error that names the word
//! where it does not.
//!
//! Inputs are integers (floats hold small integers, so every sum is exact
//! in any order): every backend must give the same bits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::algorithms::{ReduceOp, Scalar};
use hetero::host_kernel::{Args, Block, Fault, HostKernel};
use hetero::{AnyDevice, Backend, Context, ErrorKind, LaunchConfig};

/// Items per thread of the `_items_` collectives.
const ITEMS: u32 = 3;
/// Blocks per launch.
const BLOCKS: u32 = 3;
const OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max];

/// Values of every type from a seed: integers over their whole range
/// (sums wrap), floats small integers with a NaN now and then where `nan`.
trait Value: Scalar {
    fn from_seed(x: u64, nan: bool) -> Self;
}
macro_rules! value {
    ($t:ty, int) => {
        impl Value for $t {
            fn from_seed(x: u64, _: bool) -> Self {
                x as $t
            }
        }
    };
    ($t:ty, float) => {
        impl Value for $t {
            fn from_seed(x: u64, nan: bool) -> Self {
                if nan && x % 13 == 0 { <$t>::NAN } else { (x % 17) as $t - 8.0 }
            }
        }
    };
}
value!(u32, int);
value!(i32, int);
value!(u64, int);
value!(i64, int);
value!(f32, float);
value!(f64, float);

fn values<T: Value>(n: usize, seed: u64, nan: bool) -> Vec<T> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            // splitmix64
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            T::from_seed(z ^ (z >> 31), nan)
        })
        .collect()
}

fn op_name(op: ReduceOp) -> &'static str {
    op.dialect_name()
}

/// The block collectives' test kernels for `T`: `coll_add`, `coll_min`, `coll_max`.
fn block_source<T: Scalar>() -> String {
    let (t, s) = (T::NAME, T::SUFFIX);
    let mut out = String::new();
    for op in OPS {
        let o = op_name(op);
        let head = |name: &str| {
            format!(
                "KERNEL void coll_{o}{name}(GLOBAL const {t}* in, GLOBAL {t}* out, GLOBAL {t}* tiles, uint n SHARED_PARAM({t}, sh)) {{
    SHARED_DECL({t}, sh);
    uint b = BLOCK_THREADS;
    uint gid = BLOCK_X * b + THREAD_LINEAR;
    uint tile = BLOCK_X * b * {ITEMS}u;
    {t} items[{ITEMS}];
"
            )
        };
        // A few collectives per kernel: CPU OpenCL compilers take time that
        // grows fast with the barriers of one kernel.
        out.push_str(&format!(
            "{}    {t} v = in[gid];
    out[gid] = block_reduce_{o}_{s}(sh, v);
    out[n + gid] = block_inclusive_scan_{o}_{s}(sh, v);
    out[2u * n + gid] = block_exclusive_scan_{o}_{s}(sh, v);
}}
{}    block_load_striped_{s}(in + tile, b * {ITEMS}u, items, {ITEMS}u, in[0]);
    out[3u * n + gid] = block_reduce_items_{o}_{s}(sh, items, {ITEMS}u);
    block_striped_to_blocked_{s}(sh, items, {ITEMS}u);
    out[4u * n + gid] = block_inclusive_scan_items_{o}_{s}(sh, items, {ITEMS}u);
    block_blocked_to_striped_{s}(sh, items, {ITEMS}u);
    block_store_striped_{s}(tiles + tile, b * {ITEMS}u, items, {ITEMS}u);
}}
{}    block_load_striped_{s}(in + tile, b * {ITEMS}u, items, {ITEMS}u, in[0]);
    block_striped_to_blocked_{s}(sh, items, {ITEMS}u);
    block_exclusive_scan_items_{o}_{s}(sh, items, {ITEMS}u);
    block_blocked_to_striped_{s}(sh, items, {ITEMS}u);
    block_store_striped_{s}(tiles + n * {ITEMS}u + tile, b * {ITEMS}u, items, {ITEMS}u);
}}
",
            head(""),
            head("_items"),
            head("_exclusive_items")
        ));
    }
    out
}

/// The subgroup words' test kernel for `T`: `coll_sg`.
fn subgroup_source<T: Scalar>() -> String {
    let (t, s) = (T::NAME, T::SUFFIX);
    let mut collectives = String::new();
    for (k, op) in OPS.iter().enumerate() {
        let o = op_name(*op);
        let at = 5 + 3 * k;
        collectives.push_str(&format!(
            "    out[{at}u * n + gid] = sg_reduce_{o}_{s}(v);
    out[{}u * n + gid] = sg_inclusive_scan_{o}_{s}(v);
    out[{}u * n + gid] = sg_exclusive_scan_{o}_{s}(v);
",
            at + 1,
            at + 2
        ));
    }
    format!(
        "KERNEL void coll_sg(GLOBAL const {t}* in, GLOBAL {t}* out, GLOBAL uint* meta, GLOBAL ulong* votes, uint n) {{
    uint gid = BLOCK_X * BLOCK_THREADS + THREAD_LINEAR;
    {t} v = in[gid];
    uint lane = SUBGROUP_LANE, lanes = SUBGROUP_LANES;
    meta[5u * gid] = SUBGROUP_SIZE;
    meta[5u * gid + 1u] = lane;
    meta[5u * gid + 2u] = SUBGROUP_ID;
    meta[5u * gid + 3u] = SUBGROUP_COUNT;
    meta[5u * gid + 4u] = lanes;
    out[gid] = sg_shuffle_{s}(v, (lane + 1u) % lanes);
    out[n + gid] = sg_broadcast_{s}(v, 0u);
    out[2u * n + gid] = sg_shuffle_up_{s}(v, 1u);
    out[3u * n + gid] = sg_shuffle_down_{s}(v, 2u);
    out[4u * n + gid] = sg_shuffle_xor_{s}(v, 1u);
{collectives}    int p = v > ({t})0;
    votes[3u * gid] = sg_ballot(p);
    votes[3u * gid + 1u] = (ulong)sg_any(p);
    votes[3u * gid + 2u] = (ulong)sg_all(p);
}}
"
    )
}

/// The kernels' names for `op`, in the order of [`coll_host`]'s `KIND`.
fn kernel_names(op: ReduceOp) -> [String; 3] {
    let o = op_name(op);
    [format!("coll_{o}"), format!("coll_{o}_items"), format!("coll_{o}_exclusive_items")]
}

/// The test kernels on the host, through `Block`'s collectives: `KIND` 0
/// the one-value collectives, 1 the inclusive items, 2 the exclusive ones.
fn coll_host<T: Value, const OP: u8, const KIND: u8>(block: &Block, args: &Args) -> Fault {
    let op = OPS[OP as usize];
    let (input, out, tiles, n) = (args.slice::<T>(0)?, args.slice_mut::<T>(1)?, args.slice_mut::<T>(2)?, args.u32(3)?);
    let (b, n, items) = (block.threads(), n as usize, ITEMS as usize);
    let first = block.idx()[0] as usize * b;
    if KIND == 0 {
        let mut v = vec![T::zeroed(); b];
        input.read(first, &mut v)?;
        let total = block.reduce(&v, op);
        let mut inclusive = v.clone();
        block.inclusive_scan(&mut inclusive, op);
        block.exclusive_scan(&mut v, op);
        for t in 0..b {
            out.set(first + t, total)?;
        }
        out.write(n + first, &inclusive)?;
        return out.write(2 * n + first, &v);
    }
    let mut tile = vec![T::zeroed(); b * items];
    input.read(first * items, &mut tile)?;
    if KIND == 2 {
        block.exclusive_scan(&mut tile, op);
        return tiles.write(n * items + first * items, &tile);
    }
    let total = block.reduce(&tile, op);
    block.inclusive_scan(&mut tile, op);
    for t in 0..b {
        out.set(3 * n + first + t, total)?;
        out.set(4 * n + first + t, total)?;
    }
    tiles.write(first * items, &tile)
}

fn host_kernels<T: Value>() -> Vec<HostKernel> {
    type KernelFn = fn(&Block, &Args) -> Fault;
    let functions: [[KernelFn; 3]; 3] = [
        [coll_host::<T, 0, 0>, coll_host::<T, 0, 1>, coll_host::<T, 0, 2>],
        [coll_host::<T, 1, 0>, coll_host::<T, 1, 1>, coll_host::<T, 1, 2>],
        [coll_host::<T, 2, 0>, coll_host::<T, 2, 1>, coll_host::<T, 2, 2>],
    ];
    OPS.iter()
        .zip(functions)
        .flat_map(|(op, fs)| kernel_names(*op).into_iter().zip(fs))
        .map(|(name, f)| HostKernel::new(name, f).slice::<T>().slice_mut::<T>().slice_mut::<T>().scalar::<u32>())
        .collect()
}

/// Bitwise equality, so that NaN equals NaN and -0.0 differs from 0.0.
fn same<T: Scalar>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

fn first_difference<T: Scalar>(got: &[T], want: &[T]) -> String {
    let at = (0..got.len()).find(|&i| !same(&got[i..=i], &want[i..=i])).unwrap_or(0);
    format!("first difference at {at}: got {:?}, want {:?}", got[at], want[at])
}

/// Block shapes to test, as far as `limit` allows: 1D sizes across
/// subgroup boundaries where the device has subgroups (fewer where not:
/// each shape is a compile of its own on CPU OpenCL), and one 2D shape
/// (THREAD_LINEAR over two dimensions).
fn shapes(limit: u32, subgroups: bool) -> Vec<[u32; 3]> {
    let sizes: &[u32] = if subgroups { &[1, 7, 32, 48, 64, 96, 256, 1024] } else { &[1, 7, 48, 256] };
    let mut out: Vec<[u32; 3]> = sizes.iter().filter(|&&b| b <= limit).map(|&b| [b, 1, 1]).collect();
    if limit >= 48 {
        out.push([8, 6, 1]);
    }
    out
}

fn block_collectives<T: Value>(ctx: &Context<AnyDevice>) {
    let stream = ctx.stream().unwrap();
    let module = ctx.build_module_with(&block_source::<T>(), &host_kernels::<T>()).unwrap();
    for op in OPS {
        let kernels: Vec<_> = kernel_names(op).iter().map(|name| module.kernel(name).unwrap()).collect();
        let limit = kernels.iter().map(|k| k.limits().max_threads).min().unwrap();
        let mut tested = shapes(limit, !ctx.info().subgroup_sizes.is_empty());
        if op != ReduceOp::Sum {
            // Every shape is tested with sums; min and max at two (each
            // shape is a compile of its own on CPU OpenCL).
            tested.retain(|s| matches!(s[0], 48 | 256) && s[1] == 1);
        }
        for shape in tested {
            let b = shape.iter().product::<u32>() as usize;
            let size = std::mem::size_of::<T>();
            let shared = b.max(b * ITEMS as usize + b * ITEMS as usize / 32) * size;
            if shared > ctx.info().shared_memory_per_block {
                continue;
            }
            let n = b * BLOCKS as usize;
            let items = ITEMS as usize;
            let input = values::<T>(n * items, b as u64 * 31 + op as u64, op != ReduceOp::Sum);
            let d_in = stream.upload(&input).unwrap();
            let mut d_out = stream.alloc_zeros::<T>(5 * n).unwrap();
            let mut d_tiles = stream.alloc_zeros::<T>(2 * n * items).unwrap();
            let config = LaunchConfig { grid: [BLOCKS, 1, 1], block: shape, shared_bytes: shared };
            for kernel in &kernels {
                // SAFETY: thread gid reads in[gid] and its block's tile of
                // b * ITEMS elements (n * ITEMS in all), writes
                // out[k * n + gid] for k < 5 and its block's tile in either
                // half of tiles (2 * n * ITEMS).
                unsafe {
                    stream
                        .launch(
                            kernel,
                            config,
                            &[(&d_in).into(), (&mut d_out).into(), (&mut d_tiles).into(), (n as u32).into()],
                        )
                        .unwrap();
                }
            }
            let (out, tiles) = (stream.download(&d_out).unwrap(), stream.download(&d_tiles).unwrap());
            let mut want = vec![T::zeroed(); 5 * n];
            let mut want_tiles = vec![T::zeroed(); 2 * n * items];
            for blk in 0..BLOCKS as usize {
                let v = &input[blk * b..(blk + 1) * b];
                let (mut inc, mut exc) = (op.identity::<T>(), op.identity::<T>());
                let total = v.iter().fold(op.identity::<T>(), |a, &x| op.apply(a, x));
                for (t, &x) in v.iter().enumerate() {
                    inc = op.apply(inc, x);
                    want[blk * b + t] = total;
                    want[n + blk * b + t] = inc;
                    want[2 * n + blk * b + t] = exc;
                    exc = op.apply(exc, x);
                }
                let tile = &input[blk * b * items..(blk + 1) * b * items];
                let tile_total = tile.iter().fold(op.identity::<T>(), |a, &x| op.apply(a, x));
                let (mut inc, mut exc) = (op.identity::<T>(), op.identity::<T>());
                for (j, &x) in tile.iter().enumerate() {
                    inc = op.apply(inc, x);
                    want_tiles[blk * b * items + j] = inc;
                    want_tiles[n * items + blk * b * items + j] = exc;
                    exc = op.apply(exc, x);
                }
                for t in 0..b {
                    want[3 * n + blk * b + t] = tile_total;
                    want[4 * n + blk * b + t] = tile_total;
                }
            }
            let what = format!("{} {} {:?} on {}", T::NAME, op_name(op), shape, ctx.info().name);
            for (k, word) in [
                "block_reduce",
                "block_inclusive_scan",
                "block_exclusive_scan",
                "block_reduce_items",
                "block_inclusive_scan_items (total)",
            ]
            .iter()
            .enumerate()
            {
                let (got, want) = (&out[k * n..(k + 1) * n], &want[k * n..(k + 1) * n]);
                assert!(same(got, want), "{word} {what}: {}", first_difference(got, want));
            }
            for (k, word) in ["block_inclusive_scan_items", "block_exclusive_scan_items"].iter().enumerate() {
                let range = k * n * items..(k + 1) * n * items;
                let (got, want) = (&tiles[range.clone()], &want_tiles[range]);
                assert!(same(got, want), "{word} {what}: {}", first_difference(got, want));
            }
        }
    }
}

fn subgroup_words<T: Value>(ctx: &Context<AnyDevice>) {
    let source = subgroup_source::<T>();
    if ctx.info().subgroup_sizes.is_empty() {
        // No subgroups: the build fails naming the device and the word.
        let error = ctx.build_module(&source).expect_err("a subgroup word built on a device without subgroups");
        if ctx.info().backend != Backend::Host {
            assert_eq!(error.kind, ErrorKind::Build, "{error}");
            assert!(error.message.contains(&ctx.info().name), "{error}");
            assert!(error.message.contains("`SUBGROUP_LANE`"), "{error}");
        }
        return;
    }
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(&source).unwrap().kernel("coll_sg").unwrap();
    let width =
        kernel.limits().subgroup_size.expect("a kernel on a device with subgroups has a subgroup size") as usize;
    assert!(ctx.info().subgroup_sizes.contains(&(width as u32)));
    for shape in shapes(kernel.limits().max_threads, true) {
        let b = shape.iter().product::<u32>() as usize;
        let n = b * BLOCKS as usize;
        let input = values::<T>(n, b as u64 * 7 + 1, false);
        let d_in = stream.upload(&input).unwrap();
        let mut d_out = stream.alloc_zeros::<T>(14 * n).unwrap();
        let mut d_meta = stream.alloc_zeros::<u32>(5 * n).unwrap();
        let mut d_votes = stream.alloc_zeros::<u64>(3 * n).unwrap();
        let config = LaunchConfig { grid: [BLOCKS, 1, 1], block: shape, shared_bytes: 0 };
        // SAFETY: thread gid reads in[gid] and writes out[k * n + gid]
        // (k < 14), meta[5 * gid ..][..5] and votes[3 * gid ..][..3].
        unsafe {
            stream
                .launch(
                    &kernel,
                    config,
                    &[
                        (&d_in).into(),
                        (&mut d_out).into(),
                        (&mut d_meta).into(),
                        (&mut d_votes).into(),
                        (n as u32).into(),
                    ],
                )
                .unwrap();
        }
        let (out, meta, votes) =
            (stream.download(&d_out).unwrap(), stream.download(&d_meta).unwrap(), stream.download(&d_votes).unwrap());
        let what = format!("{} {:?} on {} (subgroups of {width})", T::NAME, shape, ctx.info().name);
        for gid in 0..n {
            let t = gid % b;
            let (sg, lane) = (t / width, t % width);
            let lanes = width.min(b - sg * width);
            let base = gid - lane;
            let m = &meta[5 * gid..5 * gid + 5];
            assert_eq!(
                m,
                [width as u32, lane as u32, sg as u32, b.div_ceil(width) as u32, lanes as u32],
                "meta {what}, thread {gid}"
            );
            let at = |l: usize| input[base + l];
            let check = |k: usize, want: T, word: &str| {
                assert!(
                    same(&[out[k * n + gid]], &[want]),
                    "{word} {what}, thread {gid}: got {:?}, want {want:?}",
                    out[k * n + gid]
                );
            };
            check(0, at((lane + 1) % lanes), "sg_shuffle");
            check(1, at(0), "sg_broadcast");
            check(2, if lane >= 1 { at(lane - 1) } else { at(lane) }, "sg_shuffle_up");
            check(3, if lane + 2 < lanes { at(lane + 2) } else { at(lane) }, "sg_shuffle_down");
            if (lane ^ 1) < lanes {
                check(4, at(lane ^ 1), "sg_shuffle_xor");
            }
            for (k, op) in OPS.iter().enumerate() {
                let fold = |end: usize| (0..end).fold(op.identity::<T>(), |a, l| op.apply(a, at(l)));
                check(5 + 3 * k, fold(lanes), &format!("sg_reduce_{}", op_name(*op)));
                check(6 + 3 * k, fold(lane + 1), &format!("sg_inclusive_scan_{}", op_name(*op)));
                check(7 + 3 * k, fold(lane), &format!("sg_exclusive_scan_{}", op_name(*op)));
            }
            let ballot = (0..lanes).filter(|&l| at(l) > T::zeroed()).fold(0u64, |m, l| m | 1 << l);
            assert_eq!(votes[3 * gid], ballot, "sg_ballot {what}, thread {gid}");
            assert_eq!(votes[3 * gid + 1], u64::from(ballot != 0), "sg_any {what}, thread {gid}");
            assert_eq!(
                votes[3 * gid + 2],
                u64::from(ballot.count_ones() as usize == lanes),
                "sg_all {what}, thread {gid}"
            );
        }
    }
}

/// The block collectives and subgroup words of `T` on `backend`.
fn collectives_of<T: Value>(backend: Backend) {
    let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { return };
    if T::NAME == "double" && !ctx.info().fp64 {
        println!("skipped: f64 collectives ({} has no 64-bit floats)", ctx.info().name);
        return;
    }
    block_collectives::<T>(&ctx);
    subgroup_words::<T>(&ctx);
}

/// One test per backend and type, so that they run in parallel.
macro_rules! tests {
    ($($name:ident: $t:ty),*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn host() {
                collectives_of::<$t>(Backend::Host);
            }
            #[test]
            fn opencl() {
                collectives_of::<$t>(Backend::OpenCl);
            }
            #[test]
            fn cuda() {
                collectives_of::<$t>(Backend::Cuda);
            }
            #[test]
            fn hip() {
                collectives_of::<$t>(Backend::Hip);
            }
        }
    )*};
}

tests!(u32s: u32, i32s: i32, u64s: u64, i64s: i64, f32s: f32, f64s: f64);
