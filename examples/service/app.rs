//! Starting and stopping the service: the listener, the server with its
//! graceful shutdown, the probe, and the final checks.

use crate::backend::Backend;
use crate::model::ShutdownReport;
use crate::routes::router;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A started service; [`Running::shutdown`] stops it.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Which store it runs on.
    pub scheme: &'static str,
    backend: Arc<Backend>,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    probe: JoinHandle<()>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Opens the store at `url` and serves on `listener` (from this
/// runtime's tasks) until [`Running::shutdown`].
pub async fn start(url: String, listener: TcpListener) -> Result<Running, BoxError> {
    let backend = Backend::open(url).await?;
    let (stop, stopped) = watch::channel(false);
    let probe = backend.probe.spawn(stopped.clone());
    let addr = listener.local_addr()?;
    let app = router(backend.clone());
    let mut stopped_server = stopped;
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped_server.wait_for(|s| *s).await;
            })
            .await
    });
    Ok(Running {
        addr,
        scheme: backend.scheme(),
        backend,
        stop,
        server,
        probe,
    })
}

impl Running {
    /// Stops accepting, waits for the requests in flight, then flushes the
    /// game queue, stops the worker and the compactor and checks every
    /// acknowledged vote and score (see [`ShutdownReport`]).
    pub async fn shutdown(self) -> Result<ShutdownReport, BoxError> {
        let _ = self.stop.send(true);
        self.server.await??;
        self.probe.await?;
        // The async handles drop the store on its own threads.
        Ok(self.backend.shutdown().await?)
    }
}
