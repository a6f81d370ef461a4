//! quicsm-quinn: the quicsm lab program for quinn. A server that answers every bidirectional
//! stream carrying "GET <n>\n" with n bytes, and a client that fetches `--objects` objects over
//! one connection with `--parallel` streams at a time and prints one JSON line.
//!
//!   quicsm-quinn server --listen HOST:PORT --qlog-dir DIR
//!   quicsm-quinn client --connect HOST:PORT --objects N --object-size BYTES --qlog-dir DIR [--parallel P]
//!
//! The sender's congestion controller comes from QUICSM_CC (newreno, cubic, bbr; default
//! newreno) and the packet reordering threshold from QUICSM_REORDER_THRESHOLD (default 3).
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, QlogConfig, TransportConfig, VarInt};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

const ALPN: &[u8] = b"quicsm-lab";

/// A qlog writer whose buffer the program can flush itself (on shutdown).
#[derive(Clone)]
struct SharedWriter(Arc<Mutex<BufWriter<File>>>);

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

fn flags(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let name = key.strip_prefix("--").ok_or(format!("unexpected argument {key:?}"))?;
        let value = it.next().ok_or(format!("{key} needs a value"))?;
        out.insert(name.to_string(), value.clone());
    }
    Ok(out)
}

fn need<'a>(f: &'a HashMap<String, String>, key: &str) -> Result<&'a str, String> {
    f.get(key).map(String::as_str).ok_or(format!("--{key} is required"))
}

fn number<T: std::str::FromStr>(f: &HashMap<String, String>, key: &str, default: T) -> Result<T, String> {
    match f.get(key) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| format!("--{key}: expected a number, got {v:?}")),
    }
}

/// Transport settings shared by both sides, with qlog written to `path`.
fn transport(path: PathBuf) -> Result<(TransportConfig, SharedWriter), String> {
    let mut t = TransportConfig::default();
    match std::env::var("QUICSM_CC").unwrap_or_else(|_| "newreno".into()).as_str() {
        "newreno" | "reno" => t.congestion_controller_factory(Arc::new(NewRenoConfig::default())),
        "cubic" => t.congestion_controller_factory(Arc::new(CubicConfig::default())),
        "bbr" => t.congestion_controller_factory(Arc::new(BbrConfig::default())),
        other => return Err(format!("QUICSM_CC: unknown controller {other:?} (newreno, cubic, bbr)")),
    };
    if let Ok(v) = std::env::var("QUICSM_REORDER_THRESHOLD") {
        t.packet_threshold(v.parse().map_err(|_| format!("QUICSM_REORDER_THRESHOLD: {v:?}"))?);
    }
    // 32 MB flow-control windows, so that the receiver never limits the sender
    t.stream_receive_window(VarInt::from_u32(32 << 20));
    t.receive_window(VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    t.max_idle_timeout(Some(VarInt::from_u32(30_000).into()));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let writer = SharedWriter(Arc::new(Mutex::new(BufWriter::with_capacity(1 << 16, file))));
    let mut q = QlogConfig::default();
    q.writer(Box::new(writer.clone())).title(Some("quicsm lab".into()));
    t.qlog_stream(q.into_stream());
    Ok((t, writer))
}

async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream) -> Result<(), String> {
    let req = recv.read_to_end(64).await.map_err(|e| e.to_string())?;
    let req = String::from_utf8_lossy(&req);
    let n: u64 = req
        .strip_prefix("GET ")
        .and_then(|r| r.trim().parse().ok())
        .ok_or(format!("bad request {req:?}"))?;
    let chunk = vec![0u8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        send.write_all(&chunk[..k]).await.map_err(|e| e.to_string())?;
        left -= k as u64;
    }
    send.finish().map_err(|e| e.to_string())?;
    send.stopped().await.ok();
    Ok(())
}

async fn server(f: HashMap<String, String>) -> Result<(), String> {
    let listen: SocketAddr = need(&f, "listen")?.parse().map_err(|e| format!("--listen: {e}"))?;
    let dir = PathBuf::from(need(&f, "qlog-dir")?);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (t, writer) = transport(dir.join("quinn_server.sqlog"))?;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .map_err(|e| e.to_string())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(t));
    let endpoint = Endpoint::server(config, listen).map_err(|e| format!("{listen}: {e}"))?;
    println!("ready");
    let accept = async {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                while let Ok((send, recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        if let Err(e) = serve_stream(send, recv).await {
                            eprintln!("stream: {e}");
                        }
                    });
                }
            });
        }
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    tokio::select! {
        _ = accept => {}
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    endpoint.close(VarInt::from_u32(0), b"shutdown");
    tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await.ok();
    let flushed = writer.0.lock().unwrap().flush();
    flushed.map_err(|e| e.to_string())
}

/// The lab's certificate is self-signed: the client accepts any server certificate.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

async fn fetch(conn: quinn::Connection, size: u64) -> Result<u64, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(format!("GET {size}\n").as_bytes()).await.map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    while let Some(k) = recv.read(&mut buf).await.map_err(|e| e.to_string())? {
        got += k as u64;
    }
    if got != size {
        return Err(format!("object of {got} bytes, expected {size}"));
    }
    Ok(got)
}

async fn client(f: HashMap<String, String>) -> Result<(), String> {
    let connect: SocketAddr = need(&f, "connect")?.parse().map_err(|e| format!("--connect: {e}"))?;
    let objects: u64 = number(&f, "objects", 1)?;
    let size: u64 = number(&f, "object-size", 1 << 20)?;
    let parallel: u64 = number(&f, "parallel", 1)?;
    if objects < 1 || parallel < 1 {
        return Err("--objects and --parallel must be >= 1".into());
    }
    let dir = PathBuf::from(need(&f, "qlog-dir")?);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (t, writer) = transport(dir.join("quinn_client.sqlog"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(t));
    let bind: SocketAddr = if connect.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().unwrap();
    let mut endpoint = Endpoint::client(bind).map_err(|e| e.to_string())?;
    endpoint.set_default_client_config(config);

    let start = Instant::now();
    let result = async {
        let conn = endpoint.connect(connect, "localhost").map_err(|e| e.to_string())?.await.map_err(|e| e.to_string())?;
        let next = Arc::new(Mutex::new(0u64));
        let mut workers = Vec::new();
        for _ in 0..parallel.min(objects) {
            let (conn, next) = (conn.clone(), next.clone());
            workers.push(tokio::spawn(async move {
                let mut total = 0u64;
                loop {
                    {
                        let mut n = next.lock().unwrap();
                        if *n >= objects {
                            return Ok::<u64, String>(total);
                        }
                        *n += 1;
                    }
                    total += fetch(conn.clone(), size).await?;
                }
            }));
        }
        let mut total = 0u64;
        let mut error = None;
        for w in workers {
            match w.await.map_err(|e| e.to_string()).and_then(|r| r) {
                Ok(k) => total += k,
                Err(e) => error = error.or(Some(e)),
            }
        }
        conn.close(VarInt::from_u32(0), b"done");
        Ok::<(u64, Option<String>), String>((total, error))
    };
    let (total, error) = match tokio::time::timeout(Duration::from_secs(120), result).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (0, Some(e)),
        Err(_) => (0, Some("timed out after 120 s".into())),
    };
    let elapsed_ms = start.elapsed().as_secs_f64() * 1000.0;
    tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await.ok();
    writer.0.lock().unwrap().flush().map_err(|e| e.to_string())?;
    let error_json = match &error {
        Some(e) => format!("\"{}\"", e.replace('\\', "\\\\").replace('"', "\\\"")),
        None => "null".into(),
    };
    println!(
        "{{\"ok\": {}, \"bytes\": {total}, \"completion_ms\": {elapsed_ms:.3}, \"error\": {error_json}}}",
        error.is_none()
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let result = match (args.get(1).map(String::as_str), flags(args.get(2..).unwrap_or(&[]))) {
        (_, Err(e)) => Err(e),
        (Some("server"), Ok(f)) => rt.block_on(server(f)),
        (Some("client"), Ok(f)) => rt.block_on(client(f)),
        _ => Err("usage: quicsm-quinn server|client [--flag value ...]".into()),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
