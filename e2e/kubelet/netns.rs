//! A pod's own network namespace, as a container runtime gives each pod: only a loopback
//! interface, so every pod may listen on the same ports (a workflow-controller's 9090 and 6060).
//! The API server is reached as from a real pod, at KUBERNETES_SERVICE_HOST:PORT, which here is a
//! forwarder listening on the pod's own loopback and connecting to the API server on the host's.
//! Nothing leaves loopback. The namespace lives as long as this process holds it or the pod's
//! process runs in it: nothing is left on the host.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

/// The port the pod finds the API server on (KUBERNETES_SERVICE_PORT), as a Service's 443.
pub const API_PORT: u16 = 443;

pub struct Netns {
    /// The namespace, held open: `/proc/<our pid>/fd/<fd>` names it for `nsenter --net`.
    file: File,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Netns {
    /// A new namespace with its loopback up, forwarding 127.0.0.1:443 in it to `api_server`.
    pub fn new(api_server: SocketAddr) -> std::io::Result<Netns> {
        let (file, listener) = in_new_namespace()?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let forwarder = tokio::spawn(forward(listener, api_server));
        Ok(Netns { file, forwarder })
    }

    /// The path `nsenter --net=` enters it by.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.file.as_raw_fd()
        ))
    }

    /// Connects to `port` on the pod's loopback, as a probe does.
    pub async fn connect(&self, port: u16) -> std::io::Result<tokio::net::TcpStream> {
        let file = self.file.try_clone()?;
        // setns() moves the calling thread, so a thread of its own, which ends right after (never
        // one of tokio's, which would stay in the pod's namespace).
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let connected = enter(&file).and_then(|()| {
                TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), TIMEOUT)
            });
            let _ = sender.send(connected);
        });
        let stream = receiver
            .await
            .map_err(|_| std::io::Error::other("the probe thread ended"))??;
        stream.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(stream)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

const TIMEOUT: Duration = Duration::from_secs(2);

/// On a thread of its own: a new network namespace, its loopback up, the forwarder's listener.
fn in_new_namespace() -> std::io::Result<(File, TcpListener)> {
    std::thread::spawn(|| {
        // SAFETY: unshare(2) takes flags only; it moves this thread alone.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // A child forked from this thread starts in its namespace.
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()?;
        if !up.success() {
            return Err(std::io::Error::other("ip link set lo up failed"));
        }
        let file = File::open("/proc/thread-self/ns/net")?;
        let listener = TcpListener::bind(("127.0.0.1", API_PORT))?;
        Ok((file, listener))
    })
    .join()
    .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
}

fn enter(namespace: &File) -> std::io::Result<()> {
    // SAFETY: setns(2) on a namespace file this process holds open; it moves this thread alone.
    if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Each connection the pod opens, spliced to the API server (TLS passes through untouched: the
/// pod checks the API server's certificate, issued for 127.0.0.1, itself).
async fn forward(listener: tokio::net::TcpListener, api_server: SocketAddr) {
    loop {
        let Ok((mut inside, _)) = listener.accept().await else {
            // Out of descriptors, say: try again a little later rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outside) = tokio::net::TcpStream::connect(api_server).await {
                let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
            }
        });
    }
}
