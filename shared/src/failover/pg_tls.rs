//! TLS for the Postgres write canary: tokio-postgres over rustls, trusting
//! only the CA bundle the plan names (RDS certificates chain to the Amazon
//! RDS CA, which no system store holds). The hostname is verified.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// Builds TLS connections that trust exactly one PEM bundle.
#[derive(Clone)]
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
    /// The name the server's certificate must carry, when it is not the
    /// host dialled (S's instance endpoint, reached through another name).
    server_name: Option<ServerName<'static>>,
}

impl RustlsConnect {
    /// Trust the certificates in `pem` (one or more `BEGIN CERTIFICATE` blocks).
    pub fn trusting(pem: &str) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        let mut n = 0;
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("CA bundle: {e:?}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("CA bundle: certificate {}: {e}", n + 1))?;
            n += 1;
        }
        if n == 0 {
            return Err("CA bundle: no PEM certificate in it".into());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
            server_name: None,
        })
    }

    /// Verify the server's certificate against `name` instead of the host
    /// dialled. RDS certificates name the instance endpoint, so this is how
    /// the canary proves it reached S's instance and nothing else.
    pub fn verifying(mut self, name: &str) -> Result<Self, String> {
        let name = ServerName::try_from(name.to_owned())
            .map_err(|e| format!("TLS server name {name:?}: {e}"))?;
        self.server_name = Some(name);
        Ok(self)
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnector;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnector, Self::Error> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(domain.to_owned())?,
        };
        Ok(RustlsConnector {
            config: self.config.clone(),
            name,
        })
    }
}

/// One connection's TLS handshake.
pub struct RustlsConnector {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let tls = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A TLS stream Postgres talks over.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// SCRAM without channel binding (what RDS offers by default).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let err = RustlsConnect::trusting("not a certificate").err().unwrap();
        assert!(err.contains("no PEM certificate"), "{err}");
        let err = RustlsConnect::trusting(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .err()
        .unwrap();
        assert!(err.starts_with("CA bundle"), "{err}");
    }
}
