//! A counting global allocator, for the harness's `counting` build variants only: a timed binary never
//! links it (feature `count-allocs`, a binary of its own). It counts the calls that obtain memory —
//! `alloc`, `alloc_zeroed` and `realloc` — and, when `POLYPERF_ALLOC_COUNTER_PORT` is set, answers every
//! connection to 127.0.0.1 on that port with the count so far as one decimal line, so the harness reads it
//! before and after a fixed number of requests. One relaxed atomic add per call: the counting build is
//! slower, which is why no time is ever taken from it.
#![allow(unsafe_code)] // a `GlobalAlloc` impl is unsafe by definition; it only forwards to the inner allocator

use std::alloc::{GlobalAlloc, Layout};
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that turns the counter endpoint on (a port; loopback only).
pub const COUNTER_PORT_ENV: &str = "POLYPERF_ALLOC_COUNTER_PORT";

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Wraps an allocator (`std::alloc::System`, mimalloc, ...) and counts the calls that obtain memory.
#[derive(Debug)]
pub struct Counting<A>(pub A);

// SAFETY: every method forwards its arguments unchanged to the inner allocator, which upholds the
// `GlobalAlloc` contract; the counter is a plain atomic that never allocates.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are passed on as they are.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (hence from the inner one) with `layout`.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (hence from the inner one) with `layout`.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

/// Allocations counted since the process started.
#[must_use]
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Starts the counter endpoint on 127.0.0.1 when [`COUNTER_PORT_ENV`] names a port; does nothing
/// otherwise. The count is read before the answer is written, so serving it adds nothing to the reading.
///
/// # Errors
/// When the variable is not a port, or the port cannot be bound.
pub fn serve_from_env() -> io::Result<()> {
    let Ok(port) = std::env::var(COUNTER_PORT_ENV) else {
        return Ok(());
    };
    let port: u16 = port.trim().parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{COUNTER_PORT_ENV}={port:?}: {e}"),
        )
    })?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("allocation counter on 127.0.0.1:{port}: {e}"),
        )
    })?;
    std::thread::Builder::new()
        .name("alloc-counter".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let count = allocations();
                let mut stream = stream;
                let _ = writeln!(stream, "{count}");
            }
        })?;
    Ok(())
}
