//! A small HTTP/1.1 client over one keep-alive connection (hyper's), as a
//! browser tab or a mobile app holds one: the tests and the load
//! generator talk to the service through it, over real loopback TCP.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use std::net::SocketAddr;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One connection to the service.
pub struct Client {
    send: SendRequest<Full<Bytes>>,
    host: String,
}

/// A response: the status and the body as text.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, BoxError> {
        serde_json::from_str(&self.body)
            .map_err(|e| format!("{e} in a {} body: {}", self.status, self.body).into())
    }
}

impl Client {
    /// Connects to the service at `addr`.
    pub async fn connect(addr: SocketAddr) -> Result<Client, BoxError> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        // The connection's I/O runs as its own task until the client drops.
        tokio::spawn(conn);
        Ok(Client {
            send,
            host: addr.to_string(),
        })
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Result<Reply, BoxError> {
        self.request(Method::GET, path, None).await
    }

    /// `POST path` with `body` as JSON (or no body).
    pub async fn post(&mut self, path: &str, body: Option<&str>) -> Result<Reply, BoxError> {
        self.request(Method::POST, path, body).await
    }

    async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&str>,
    ) -> Result<Reply, BoxError> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let body = Full::new(Bytes::from(body.unwrap_or_default().to_owned()));
        self.send.ready().await?;
        let resp = self.send.send_request(req.body(body)?).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok(Reply {
            status,
            body: String::from_utf8(bytes.to_vec())?,
        })
    }
}
