//! `hello-worker`: a tool author's own worker binary. It serves two typed
//! tools to a Baton coordinator; where to dial and the worker token come from
//! the same configuration as `baton worker` (`--config FILE`, or
//! `BATON_WORKER__COORDINATOR_URL` and `BATON_WORKER__TOKEN`).

mod tools;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt().with_env_filter(filter()).init();
    match baton_worker::serve(tools::all()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello-worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())
}
