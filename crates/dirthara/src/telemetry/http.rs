//! One OTLP/HTTP request: a `POST` of a JSON body over HTTP/1.1, plain or (an `https`
//! endpoint) over TLS with rustls, trusting the web's roots and the PEM file
//! `OTEL_EXPORTER_OTLP_CERTIFICATE` names; bounded by the exporter's timeout (connecting,
//! writing and reading each). A few dozen lines instead of an HTTP client's dependency tree:
//! the CLI sends two requests per run, at its end.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::settings::Destination;

/// Sends `body` to `to`; `Err` says why it was not accepted, in words for a warning.
pub(crate) fn post(to: &Destination, body: &[u8]) -> Result<(), String> {
    let url = url::Url::parse(&to.url).map_err(|e| e.to_string())?;
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let tls = url.scheme() == "https";
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
    let stream = stream.ok_or(last)?;
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
    // Each read and write waits at most what is left of the timeout now; the loop below
    // stops at the deadline.
    stream.set_write_timeout(Some(left())).map_err(io)?;
    stream.set_read_timeout(Some(left())).map_err(io)?;
    let mut stream: Box<dyn ReadWrite> = match tls {
        true => Box::new(rustls::StreamOwned::new(
            tls_session(host, to.certificate.as_deref())?,
            stream,
        )),
        false => Box::new(stream),
    };
    stream.write_all(request.as_bytes()).map_err(io)?;
    stream.write_all(body).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
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

/// A plain or TLS stream.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A TLS client session to `host`, trusting the web's roots and the certificates of the PEM
/// file `certificate`.
fn tls_session(host: &str, certificate: Option<&Path>) -> Result<rustls::ClientConnection, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = certificate {
        let shown = path.display();
        let certificates = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE `{shown}`: {e}"))?;
        let mut added = 0;
        for certificate in certificates {
            let certificate = certificate
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE `{shown}`: {e}"))?;
            roots
                .add(certificate)
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE `{shown}`: {e}"))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_CERTIFICATE `{shown}` holds no PEM certificate"
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.trim_matches(['[', ']']).to_string())
        .map_err(|e| format!("{host} is no TLS server name: {e}"))?;
    rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())
}
