//! The websocket watch as a bench client uses it: open the offered socket and
//! read its messages until the execution's terminal view or the watch's end.

use super::rest;
use super::stats::Failure;
use serde_json::Value;
use tokio_stream::StreamExt;
use tokio_tungstenite::tungstenite::{self, Message};

/// How one watch socket ended, seen from the client.
pub(super) enum Watched {
    /// The execution's terminal view arrived (at this machine's clock, ms).
    Terminal { received_ms: i64 },
    /// The watch ended first (`timed_out`, `shutdown`, or the socket closed):
    /// ask for a new offer.
    Ended,
}

/// Opens `offer`'s socket; `opened` runs once it is open (the wait is then parked).
pub(super) async fn run(offer: &Value, opened: impl FnOnce()) -> Result<Watched, Failure> {
    let url =
        offer.get("websocket_url").and_then(Value::as_str).ok_or(Failure::Shape("offer without websocket_url"))?;
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.map_err(|e| match e {
        // Refused at the upgrade: the status says why (a used or expired token, a wait bound).
        tungstenite::Error::Http(resp) => Failure::Http { status: resp.status().as_u16(), code: None },
        tungstenite::Error::Io(_) => Failure::Transport("websocket connect: i/o"),
        _ => Failure::Transport("websocket connect: handshake"),
    })?;
    opened();
    while let Some(frame) = socket.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        let received_ms = baton_proto::clock::now_ms();
        let message: Value = serde_json::from_str(&text).map_err(|_| Failure::Shape("watch message is not JSON"))?;
        match message.get("type").and_then(Value::as_str) {
            Some("execution") if rest::status(&message["execution"]).is_terminal() => {
                return Ok(Watched::Terminal { received_ms });
            }
            Some("error") => {
                // Over the socket, after the upgrade: 101 stands for that.
                let code = message.pointer("/error/code").and_then(Value::as_str).map(str::to_owned);
                return Err(Failure::Http { status: 101, code });
            }
            Some("end") => break,
            _ => {}
        }
    }
    Ok(Watched::Ended)
}
