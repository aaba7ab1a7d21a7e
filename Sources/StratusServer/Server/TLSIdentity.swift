public import Foundation
import NIOSSL
import StratusModel

/// The certificate chain and private key the server answers HTTPS with (`stratus serve --tls-cert
/// --tls-key`): PEM files, read once at start.
public struct TLSIdentity: Sendable, Hashable {
    /// The PEM file of the server's certificate, followed by any intermediates.
    public var certificateChainPath: String
    /// The PEM file of the certificate's private key.
    public var privateKeyPath: String

    /// Names the two files.
    public init(certificateChainPath: String, privateKeyPath: String) {
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
    }

    /// Why the files could not be used.
    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The server side of TLS: TLS 1.2 or later, the chain and key from the files.
    func serverConfiguration() throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateChainPath)
        } catch {
            throw LoadError(description: "--tls-cert \(certificateChainPath): not a readable PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else {
            throw LoadError(description: "--tls-cert \(certificateChainPath): holds no certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
        } catch {
            throw LoadError(description: "--tls-key \(privateKeyPath): not a readable PEM private key (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }
}
