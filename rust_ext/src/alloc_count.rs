//! The extension's global allocator: the system allocator plus exact, per-thread allocation counts.
//!
//! Counting is off unless the calling thread is inside [`measure`], so other Python threads (and the
//! rest of the extension) never pollute a measurement and pay only one thread-local flag check per
//! allocation. Python objects come from Python's own allocator and are not seen here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Per-thread state; `const`-initialized and without `Drop`, so touching it never allocates and it
/// stays usable until the thread is gone.
struct Counter {
    active: Cell<bool>,
    allocations: Cell<u64>,
    bytes: Cell<u64>,
}

thread_local! {
    static COUNTER: Counter = const {
        Counter { active: Cell::new(false), allocations: Cell::new(0), bytes: Cell::new(0) }
    };
}

#[inline]
fn record(bytes: usize) {
    let _ = COUNTER.try_with(|c| {
        if c.active.get() {
            c.allocations.set(c.allocations.get() + 1);
            c.bytes.set(c.bytes.get() + bytes as u64);
        }
    });
}

// `GlobalAlloc` can only be implemented with an `unsafe impl` of `unsafe fn`s.
#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` with the caller's arguments unchanged; counting only
// touches thread-local cells.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    /// A reallocation counts as one allocation of `new_size` bytes (it may move the block).
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// What one piece of work asked of the allocator on its thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Allocations {
    /// `alloc`, `alloc_zeroed` and `realloc` calls.
    pub(crate) allocations: u64,
    /// Bytes requested by those calls (a `realloc` counts its new size).
    pub(crate) allocated_bytes: u64,
}

/// Restores the enclosing measurement (if any) when a measurement ends, even by unwinding.
struct Scope {
    outer: (bool, u64, u64),
}

impl Drop for Scope {
    fn drop(&mut self) {
        let _ = COUNTER.try_with(|c| {
            let (active, allocations, bytes) = self.outer;
            // An enclosing measurement also counts what the inner one saw.
            c.allocations.set(if active {
                allocations + c.allocations.get()
            } else {
                allocations
            });
            c.bytes
                .set(if active { bytes + c.bytes.get() } else { bytes });
            c.active.set(active);
        });
    }
}

/// Runs `work` on this thread, counting exactly the allocations it makes (including dropping what it
/// drops, and building its return value). Measurements nest.
pub(crate) fn measure<T>(work: impl FnOnce() -> T) -> (T, Allocations) {
    let outer = COUNTER
        .try_with(|c| {
            let outer = (c.active.get(), c.allocations.get(), c.bytes.get());
            c.allocations.set(0);
            c.bytes.set(0);
            c.active.set(true);
            outer
        })
        .unwrap_or_default();
    let scope = Scope { outer };
    let value = work();
    let counted = COUNTER
        .try_with(|c| Allocations {
            allocations: c.allocations.get(),
            allocated_bytes: c.bytes.get(),
        })
        .unwrap_or_default();
    drop(scope);
    (value, counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_and_nests() {
        let (v, outer) = measure(|| {
            let a: Vec<u8> = Vec::with_capacity(100);
            let (b, inner) = measure(|| Vec::<u64>::with_capacity(10));
            assert_eq!(
                inner,
                Allocations {
                    allocations: 1,
                    allocated_bytes: 80
                }
            );
            (a.capacity(), b.capacity())
        });
        assert_eq!(v, (100, 10));
        assert_eq!(
            outer,
            Allocations {
                allocations: 2,
                allocated_bytes: 180
            }
        );
        assert_eq!(measure(|| 1 + 1).1, Allocations::default());
    }

    #[test]
    fn other_threads_are_not_counted() {
        let ((), counted) = measure(|| {
            let handle =
                std::thread::spawn(|| (0..100).map(|i| vec![i; 10]).collect::<Vec<_>>().len());
            let _ = handle.join();
        });
        // Spawning allocates on this thread (the thread's handle and closure), but the 100 vectors
        // allocated on the other thread are not seen.
        assert!(counted.allocations < 20, "{counted:?}");
    }
}
