//! Tokio's four scheduler microbenchmarks (spawn_many, yield_many, ping_pong, chained_spawn) on the
//! pre-2019 scheduler: tokio-threadpool 0.1.18 alone ("old_threadpool") and inside tokio 0.1.22's runtime
//! ("old_runtime", which adds the reactor/timer park). Ids match `sched_bench` so one parser reads both.
// The bench bodies repeat sched_bench's benches/scheduler.rs on purpose: this crate pins
// tokio 0.1 and so cannot share code with the workspace, which is on tokio 1.
// A closed completion channel means the benchmark itself is broken: abort rather than report a time.
#![allow(clippy::expect_used)]

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::AcqRel;
use std::sync::{Arc, mpsc};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::{self, Future};
use futures::sync::oneshot;
use futures::{Async, task};
use sched_bench_old::workers_from_env;

const SPAWN_MANY_TASKS: usize = 10_000;
const YIELD_TASKS: usize = 200;
const YIELDS_PER_TASK: usize = 1_000;
const PING_PONG_PAIRS: usize = 1_000;
const CHAIN_DEPTH: usize = 1_000;

type Task = Box<dyn Future<Item = (), Error = ()> + Send>;

/// A benchmark shape: submits its tasks to the pool and returns once they have all finished.
type Shape = fn(&dyn Pool);

/// Where the benchmark thread submits root tasks; tasks spawn children via `tokio_executor::spawn`,
/// which both pools route to the current worker.
trait Pool {
    fn submit(&self, task: Task);
}

impl Pool for tokio_threadpool::ThreadPool {
    fn submit(&self, task: Task) {
        self.spawn(task);
    }
}

impl Pool for tokio::runtime::TaskExecutor {
    fn submit(&self, task: Task) {
        self.spawn(task);
    }
}

/// Counts finished tasks; the last one signals the waiting benchmark thread.
struct Countdown {
    remaining: AtomicUsize,
    done: mpsc::SyncSender<()>,
}

impl Countdown {
    fn start(n: usize) -> (Arc<Self>, mpsc::Receiver<()>) {
        let (done, rx) = mpsc::sync_channel(1);
        (
            Arc::new(Self {
                remaining: AtomicUsize::new(n),
                done,
            }),
            rx,
        )
    }

    fn tick(&self) {
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            // The receiver outlives every task of the iteration.
            let _ = self.done.send(());
        }
    }
}

fn wait(rx: &mpsc::Receiver<()>) {
    rx.recv()
        .expect("benchmark tasks dropped the completion channel");
}

/// The futures-0.1 way to yield: wake ourselves and return NotReady, `n` times.
fn yield_n(mut n: usize) -> impl Future<Item = (), Error = ()> {
    future::poll_fn(move || {
        if n == 0 {
            return Ok(Async::Ready(()));
        }
        n -= 1;
        task::current().notify();
        Ok(Async::NotReady)
    })
}

fn spawn_many(pool: &dyn Pool) {
    let (countdown, rx) = Countdown::start(SPAWN_MANY_TASKS);
    for _ in 0..SPAWN_MANY_TASKS {
        let countdown = countdown.clone();
        pool.submit(Box::new(future::lazy(move || {
            countdown.tick();
            Ok(())
        })));
    }
    wait(&rx);
}

fn yield_many(pool: &dyn Pool) {
    let (countdown, rx) = Countdown::start(YIELD_TASKS);
    for _ in 0..YIELD_TASKS {
        let countdown = countdown.clone();
        pool.submit(Box::new(
            yield_n(YIELDS_PER_TASK).map(move |()| countdown.tick()),
        ));
    }
    wait(&rx);
}

/// One pair: spawn a partner, send it a ping on one oneshot, await its pong on another.
fn ping_pong_pair(countdown: Arc<Countdown>) -> impl Future<Item = (), Error = ()> {
    future::lazy(move || {
        let (ping_tx, ping_rx) = oneshot::channel::<()>();
        let (pong_tx, pong_rx) = oneshot::channel::<()>();
        tokio_executor::spawn(
            ping_rx
                .map_err(drop)
                .and_then(move |()| pong_tx.send(()).map_err(drop)),
        );
        let _ = ping_tx.send(()); // the partner holds ping_rx until it has answered
        pong_rx.map_err(drop).map(move |()| countdown.tick())
    })
}

fn ping_pong(pool: &dyn Pool) {
    let (countdown, rx) = Countdown::start(PING_PONG_PAIRS);
    pool.submit(Box::new(future::lazy(move || {
        for _ in 0..PING_PONG_PAIRS {
            tokio_executor::spawn(ping_pong_pair(countdown.clone()));
        }
        Ok(())
    })));
    wait(&rx);
}

fn chain(done: mpsc::SyncSender<()>, depth: usize) {
    if depth == 0 {
        let _ = done.send(());
    } else {
        tokio_executor::spawn(future::lazy(move || {
            chain(done, depth - 1);
            Ok(())
        }));
    }
}

fn chained_spawn(pool: &dyn Pool) {
    let (done, rx) = mpsc::sync_channel(1);
    pool.submit(Box::new(future::lazy(move || {
        chain(done, CHAIN_DEPTH);
        Ok(())
    })));
    wait(&rx);
}

fn bench_shapes(c: &mut Criterion, group_name: &str, pool: &dyn Pool) {
    let mut group = c.benchmark_group(group_name);
    let shapes: [(&str, Shape); 4] = [
        ("spawn_many", spawn_many),
        ("yield_many", yield_many),
        ("ping_pong", ping_pong),
        ("chained_spawn", chained_spawn),
    ];
    for (name, shape) in shapes {
        group.bench_function(name, |b| b.iter(|| shape(pool)));
    }
    group.finish();
}

fn workers() -> usize {
    workers_from_env().unwrap_or_else(|message| {
        eprintln!("sched_bench_old: {message}");
        std::process::exit(2)
    })
}

fn old_threadpool(c: &mut Criterion) {
    let pool = tokio_threadpool::Builder::new()
        .pool_size(workers())
        .build();
    bench_shapes(c, "old_threadpool", &pool);
    pool.shutdown_now()
        .wait()
        .expect("tokio-threadpool shutdown");
}

fn old_runtime(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new()
        .core_threads(workers())
        .build()
        .expect("tokio 0.1 runtime");
    bench_shapes(c, "old_runtime", &runtime.executor());
    runtime
        .shutdown_now()
        .wait()
        .expect("tokio 0.1 runtime shutdown");
}

criterion_group!(benches, old_threadpool, old_runtime);
criterion_main!(benches);
