//! The locks and atomics of the typed layer's shared state, as the model
//! checks see them.
//!
//! In a normal build these are `std::sync`'s. Built with
//! `RUSTFLAGS="--cfg hetero_shuttle"` they are Shuttle's, so that
//! `tests/model.rs` runs the shipped hazard tracker, stream order, spare
//! marks, retired allocations, caching allocator and completion waker
//! (its thread too), and the handle tables' own check runs their gates, under Shuttle's scheduler, which
//! picks the thread that goes on at each of them. Each thread the checker
//! runs has its own shard (`thread_local`), as each host thread does. The
//! modules that use these create every lock at run time (a `static` lock
//! would be made outside the checker), and none of them is touched by a
//! thread the checker does not run (the host backend's workers touch none).

#[cfg(hetero_shuttle)]
pub(crate) use shuttle::sync::{
    Condvar, Mutex, MutexGuard, RwLock,
    atomic::{AtomicBool, AtomicU64, AtomicUsize},
};
#[cfg(hetero_shuttle)]
pub(crate) use shuttle::thread::{Builder, yield_now};
#[cfg(hetero_shuttle)]
pub(crate) use shuttle::thread_local;
#[cfg(not(hetero_shuttle))]
pub(crate) use std::sync::{
    Condvar, Mutex, MutexGuard, RwLock,
    atomic::{AtomicBool, AtomicU64, AtomicUsize},
};
#[cfg(not(hetero_shuttle))]
pub(crate) use std::thread::{Builder, yield_now};
#[cfg(not(hetero_shuttle))]
pub(crate) use std::thread_local;
