//! Tokio's four scheduler microbenchmarks (the shapes of tokio's `benches/rt_multi_threaded.rs`) on the
//! multi-thread runtime (group "multi_thread", `POLYPERF_WORKERS` workers) and the current-thread runtime
//! (group "current_thread"). `sched_bench_old` runs the same shapes on the pre-2019 scheduler.
//!
//! Unlike tokio's originals, completion is awaited inside `block_on` (a `Notify` or a oneshot) rather
//! than with a blocking `std::sync::mpsc::recv`: on the current-thread runtime a blocking wait would
//! stop the only thread that runs the tasks.
// A runtime that cannot be built or a chain that loses its sender is a broken benchmark: abort it.
#![allow(clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::AcqRel;

use criterion::{Criterion, criterion_group, criterion_main};
use sched_bench::workers_from_env;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::{Notify, oneshot};

const SPAWN_MANY_TASKS: usize = 10_000;
const YIELD_TASKS: usize = 200;
const YIELDS_PER_TASK: usize = 1_000;
const PING_PONG_PAIRS: usize = 1_000;
const CHAIN_DEPTH: usize = 1_000;

/// Counts finished tasks; the last one wakes the `block_on` future waiting in [`Countdown::wait`].
struct Countdown {
    remaining: AtomicUsize,
    done: Notify,
}

impl Countdown {
    fn start(n: usize) -> Arc<Self> {
        Arc::new(Self {
            remaining: AtomicUsize::new(n),
            done: Notify::new(),
        })
    }

    fn tick(&self) {
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            // notify_one keeps a permit if the waiter has not registered yet, so no wake-up is lost.
            self.done.notify_one();
        }
    }

    async fn wait(&self) {
        self.done.notified().await;
    }
}

async fn spawn_many() {
    let countdown = Countdown::start(SPAWN_MANY_TASKS);
    for _ in 0..SPAWN_MANY_TASKS {
        let countdown = countdown.clone();
        tokio::spawn(async move { countdown.tick() });
    }
    countdown.wait().await;
}

async fn yield_many() {
    let countdown = Countdown::start(YIELD_TASKS);
    for _ in 0..YIELD_TASKS {
        let countdown = countdown.clone();
        tokio::spawn(async move {
            for _ in 0..YIELDS_PER_TASK {
                tokio::task::yield_now().await;
            }
            countdown.tick();
        });
    }
    countdown.wait().await;
}

/// One pair: spawn a partner, send it a ping on one oneshot, await its pong on another.
async fn ping_pong_pair(countdown: Arc<Countdown>) {
    let (ping_tx, ping_rx) = oneshot::channel::<()>();
    let (pong_tx, pong_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        if ping_rx.await.is_ok() {
            let _ = pong_tx.send(()); // pong_rx is awaited below until this arrives
        }
    });
    let _ = ping_tx.send(()); // the partner holds ping_rx until it has answered
    if pong_rx.await.is_ok() {
        countdown.tick();
    }
}

async fn ping_pong() {
    let countdown = Countdown::start(PING_PONG_PAIRS);
    let pairs = countdown.clone();
    // As in tokio's bench, the pairs are spawned from inside a task (a worker's local queue).
    tokio::spawn(async move {
        for _ in 0..PING_PONG_PAIRS {
            tokio::spawn(ping_pong_pair(pairs.clone()));
        }
    });
    countdown.wait().await;
}

fn chain(done: oneshot::Sender<()>, depth: usize) {
    if depth == 0 {
        let _ = done.send(()); // the receiver is awaited by chained_spawn
    } else {
        tokio::spawn(async move { chain(done, depth - 1) });
    }
}

async fn chained_spawn() {
    let (done, finished) = oneshot::channel();
    tokio::spawn(async move { chain(done, CHAIN_DEPTH) });
    finished
        .await
        .expect("the chain dropped its completion sender");
}

fn bench_shape<F: Future<Output = ()>>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    name: &str,
    shape: fn() -> F,
) {
    group.bench_function(name, |b| b.iter(|| rt.block_on(shape())));
}

fn bench_runtime(c: &mut Criterion, group_name: &str, rt: &Runtime) {
    let mut group = c.benchmark_group(group_name);
    bench_shape(&mut group, rt, "spawn_many", spawn_many);
    bench_shape(&mut group, rt, "yield_many", yield_many);
    bench_shape(&mut group, rt, "ping_pong", ping_pong);
    bench_shape(&mut group, rt, "chained_spawn", chained_spawn);
    group.finish();
}

fn multi_thread(c: &mut Criterion) {
    let workers = workers_from_env().unwrap_or_else(|message| {
        eprintln!("sched_bench: {message}");
        std::process::exit(2)
    });
    let rt = Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio multi-thread runtime");
    bench_runtime(c, "multi_thread", &rt);
}

fn current_thread(c: &mut Criterion) {
    let rt = Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio current-thread runtime");
    bench_runtime(c, "current_thread", &rt);
}

criterion_group!(benches, multi_thread, current_thread);
criterion_main!(benches);
