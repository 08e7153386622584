//! Round trips counted on the wire: a TCP proxy between a runner and the server that counts
//! every request the client sends and waits on — a MySQL command packet (sequence id 0), a
//! PostgreSQL simple `Query` or extended-protocol `Sync`. Run it on a connection without TLS
//! (`ssl-mode=DISABLED`, `sslmode=disable`), whose packets it can read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Which protocol the proxy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Mysql,
    Postgres,
}

/// A counting proxy on 127.0.0.1, forwarding to `upstream`; stopped when dropped.
pub(crate) struct CountingProxy {
    pub port: u16,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    pub(crate) async fn start(wire: Wire, upstream: String) -> Result<CountingProxy, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("proxy bind: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let requests = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(relay(wire, client, server, Arc::clone(&counted)));
            }
        });
        Ok(CountingProxy {
            port,
            requests,
            task,
        })
    }

    /// Requests seen so far, over every connection.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(wire: Wire, client: TcpStream, server: TcpStream, requests: Arc<AtomicU64>) {
    let (mut from_client, mut to_server) = (client.into_split(), server.into_split());
    let (ref mut client_read, ref mut client_write) = from_client;
    let (ref mut server_read, ref mut server_write) = to_server;
    let upstream = async {
        let mut startup = wire == Wire::Postgres;
        loop {
            let forwarded = match wire {
                Wire::Mysql => mysql_packet(client_read, server_write, &requests).await,
                Wire::Postgres => {
                    postgres_message(client_read, server_write, &requests, startup).await
                }
            };
            startup = false;
            if forwarded.is_err() {
                let _ = server_write.shutdown().await;
                return;
            }
        }
    };
    let downstream = async {
        let _ = tokio::io::copy(server_read, client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// One MySQL packet: 3 bytes of length, a sequence id; a command starts at sequence 0.
async fn mysql_packet(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    requests: &AtomicU64,
) -> std::io::Result<()> {
    let mut header = [0u8; 4];
    from.read_exact(&mut header).await?;
    let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    if header[3] == 0 {
        requests.fetch_add(1, Ordering::SeqCst);
    }
    let mut body = vec![0u8; length];
    from.read_exact(&mut body).await?;
    to.write_all(&header).await?;
    to.write_all(&body).await
}

/// One PostgreSQL message: a type byte and a length (the start-up packet has no type byte).
/// A `Query` (Q) or a `Sync` (S) is where the client waits for the server.
async fn postgres_message(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    requests: &AtomicU64,
    startup: bool,
) -> std::io::Result<()> {
    let mut kind = [0u8; 1];
    if !startup {
        from.read_exact(&mut kind).await?;
        if matches!(kind[0], b'Q' | b'S') {
            requests.fetch_add(1, Ordering::SeqCst);
        }
    }
    let mut length = [0u8; 4];
    from.read_exact(&mut length).await?;
    let mut body = vec![0u8; (u32::from_be_bytes(length) as usize).saturating_sub(4)];
    from.read_exact(&mut body).await?;
    if !startup {
        to.write_all(&kind).await?;
    }
    to.write_all(&length).await?;
    to.write_all(&body).await
}
