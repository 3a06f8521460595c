//! Where a pod runs: what its task, its inputs and the node share.

use kube::Client;
use std::net::SocketAddr;
use std::path::PathBuf;

pub struct Place {
    pub client: Client,
    pub node: String,
    /// The pod's own directory on the host: its volumes, its log.
    pub dir: PathBuf,
    pub api_server: SocketAddr,
}
