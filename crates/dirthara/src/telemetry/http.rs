//! One OTLP/HTTP request: a `POST` of a JSON body over plain HTTP/1.1, bounded by the
//! exporter's timeout (connecting, writing and reading each). A few dozen lines instead of an
//! HTTP client's dependency tree: the CLI sends two requests per run, at its end.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Instant;

use super::settings::Destination;

/// Sends `body` to `to`; `Err` says why it was not accepted, in words for a warning.
pub(crate) fn post(to: &Destination, body: &[u8]) -> Result<(), String> {
    let url = url::Url::parse(&to.url).map_err(|e| e.to_string())?;
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let deadline = Instant::now() + to.timeout;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(std::time::Duration::from_millis(1))
    };
    let addresses = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = format!("{host} has no address");
    let mut stream = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, left()) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(e) => last = format!("cannot connect to {address}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last)?;
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nConnection: close\r\nUser-Agent: dirthara/{version}\r\n",
        path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        },
        length = body.len(),
        version = env!("CARGO_PKG_VERSION"),
    );
    for (name, value) in &to.headers {
        // A value with a line break would end the header block early: not sent as it is.
        let clean = |text: &str| text.replace(['\r', '\n'], " ");
        request.push_str(&format!("{}: {}\r\n", clean(name), clean(value)));
    }
    request.push_str("\r\n");
    let io = |e: std::io::Error| format!("{e}");
    stream.set_write_timeout(Some(left())).map_err(io)?;
    stream.write_all(request.as_bytes()).map_err(io)?;
    stream.write_all(body).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        stream.set_read_timeout(Some(left())).map_err(io)?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if answer.is_empty() => return Err(format!("no answer: {e}")),
            // The status line is in: a receiver that keeps the connection open is not a failure.
            Err(_) => break,
        }
        if answer.len() > 64 * 1024 || Instant::now() >= deadline {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    let status_line = answer.lines().next().unwrap_or_default();
    let status: u16 = (status_line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: `{}`", status_line.trim()))?;
    if (200..300).contains(&status) {
        return Ok(());
    }
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default().trim();
    Err(format!(
        "the receiver answered {}{}",
        status_line.trim(),
        match body.is_empty() {
            true => String::new(),
            false => format!(": {}", body.chars().take(200).collect::<String>()),
        }
    ))
}
