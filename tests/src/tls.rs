//! Test certificates: a CA of the test's own and what it signs, for the daemon's TLS.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA and, signed by it, certificates for the daemon (127.0.0.1) and for a client, as PEM
/// files in `dir`, each name after `prefix`: `ca.pem`, `server.pem`/`server.key`,
/// `client.pem`/`client.key`.
pub fn certificates(dir: &Path, prefix: &str) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, format!("wazoo test {prefix}CA"));
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    std::fs::write(dir.join(format!("{prefix}ca.pem")), ca_cert.pem()).unwrap();
    for (name, purpose) in
        [("server", ExtendedKeyUsagePurpose::ServerAuth), ("client", ExtendedKeyUsagePurpose::ClientAuth)]
    {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.extended_key_usages = vec![purpose];
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join(format!("{prefix}{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{prefix}{name}.key")), key.serialize_pem()).unwrap();
    }
}
