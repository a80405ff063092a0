//! The accept loop: one hyper HTTP/1.1 connection task per socket, keep-alive and pipelining on,
//! drained on shutdown by hyper-util's `GracefulShutdown` within the common grace period.

use std::convert::Infallible;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use server_common::ShutdownSignal;
use tokio::net::TcpListener;

use crate::routes::respond;

/// Pause after a failed accept (EMFILE and friends) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// Serves `listener` until the shutdown signal, then lets open connections finish.
pub async fn serve(listener: TcpListener, shutdown: ShutdownSignal) {
    let mut builder = http1::Builder::new();
    // The timer lets hyper enforce its header-read timeout against slow clients. No
    // `pipeline_flush`: with it on (hyper 1.12) the 400 for a malformed request line is never sent.
    builder.timer(TokioTimer::new()).keep_alive(true);
    let graceful = GracefulShutdown::new();
    let (trigger, deadline) = shutdown.with_deadline();
    tokio::pin!(trigger);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(e) => {
                        eprintln!("hyper_hello: accept failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    eprintln!("hyper_hello: cannot set TCP_NODELAY: {e}");
                }
                let service = service_fn(|request| async move { Ok::<_, Infallible>(respond(&request)) });
                let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
                // A connection error is the client's business (reset, bad request line answered
                // with 400 by hyper); logging each would flood stderr under load.
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
            () = &mut trigger => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = deadline => {}
    }
}
