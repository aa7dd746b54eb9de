//! `runner serve`: an OpenAI-compatible HTTP server over continuous batching. Requests join the
//! running batch at the next step and leave when they end; each brings its own sampler chain
//! (mapped from its sampling fields, [`params`]) into the session's sequences. The pieces:
//! [`api`] (request parsing and errors), [`params`] (fields to chains), [`template`] (chat
//! templates), [`stop`] (stop strings across tokens), [`engine`] (the batching loop),
//! [`http`] (routes, streaming), [`native`] (llama-server's own endpoints: `/tokenize`,
//! `/detokenize`, `/props`, `/completion`), [`metrics`] (Prometheus counters).

pub mod api;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod native;
pub mod params;
pub mod stop;
pub mod template;

use crate::error::{Result, RunnerError};
use crate::model::Model;
use engine::{Engine, EngineOptions};
use metrics::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

/// How to serve.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// The batching loop's settings.
    pub engine: EngineOptions,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> RunnerError + '_ {
    move |e| RunnerError::Session { what: what.to_string(), reason: e.to_string() }
}

/// A server running on its own threads ([`spawn`]): its address, and a way to stop it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl Server {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Stops it as SIGTERM does (in-flight sequences cancelled, connections closed) and waits.
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => {
                Err(RunnerError::Session { what: "the server".into(), reason: "its thread panicked".into() })
            }
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Starts a server for `model` on threads of its own and returns once it listens.
pub fn spawn(model: Arc<Model>, opts: ServeOptions) -> Result<Server> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(SocketAddr, Arc<Metrics>)>>();
    let (shutdown, rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("server".into())
        .spawn(move || {
            serve(
                model,
                opts,
                async move {
                    let _ = rx.await;
                },
                |addr, m| {
                    let _ = ready_tx.send(Ok((addr, m)));
                },
            )
            .inspect_err(|e| {
                // Reaches the caller when the server failed to start; ignored otherwise.
                let _ = ready_tx.send(Err(RunnerError::Session { what: "the server".into(), reason: e.to_string() }));
            })
        })
        .map_err(io("the server thread"))?;
    match ready_rx.recv() {
        Ok(Ok((addr, metrics))) => Ok(Server { addr, metrics, shutdown: Some(shutdown), thread: Some(thread) }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(RunnerError::Session { what: "the server".into(), reason: "it ended while starting".into() }),
    }
}

/// Serves until SIGTERM or Ctrl-C, then cancels what is in flight and returns.
pub fn run(model: Arc<Model>, opts: ServeOptions, on_ready: impl FnOnce(SocketAddr, Arc<Metrics>)) -> Result<()> {
    serve(model, opts, signal(), on_ready)
}

async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

fn serve(
    model: Arc<Model>,
    opts: ServeOptions,
    until: impl std::future::Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr, Arc<Metrics>),
) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io("the async runtime"))?;
    let metrics = Arc::new(Metrics::default());
    let chain =
        http::default_chain(&model).map_err(|reason| RunnerError::Session { what: "the server".into(), reason })?;
    let Engine { jobs, stopping, thread } =
        engine::start(Arc::clone(&model), opts.engine, Arc::clone(&metrics), chain)?;
    let state =
        http::AppState::new(jobs, model, Arc::clone(&metrics), opts.engine.session.n_ctx, opts.engine.session.n_seq)
            .map_err(|reason| RunnerError::Session { what: "the server".into(), reason })?;
    let app = http::router(Arc::new(state));
    let stop = Arc::clone(&stopping);
    let served = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.addr).await.map_err(io("binding the address"))?;
        let addr = listener.local_addr().map_err(io("the bound address"))?;
        on_ready(addr, metrics);
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                until.await;
                // Cancel what runs: its streams end, and the connections with them.
                stop.store(true, Ordering::Relaxed);
            })
            .await
            .map_err(io("serving"))
    });
    stopping.store(true, Ordering::Relaxed);
    let _ = thread.join();
    served
}
