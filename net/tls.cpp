#include "net/tls.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <boost/asio/ssl/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace psched {

namespace ssl = boost::asio::ssl;

namespace {

// OpenSSL's last error, as one line.
std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  const char* reason = ERR_reason_error_string(e);
  return reason ? reason : fmt::format("error {:#x}", e);
}

// A file we must be able to read, or why not.
Status readable(const std::string& flag, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return Status::invalid(fmt::format("{} '{}': cannot read: {}", flag, path, std::strerror(errno)));
  std::fclose(f);
  return Status::ok();
}

// "Jan  1 00:00:00 2030 GMT" for a certificate's validity bound.
std::string time_text(const ASN1_TIME* t) {
  if (!t) return "?";
  BIO* bio = BIO_new(BIO_s_mem());
  ASN1_TIME_print(bio, t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string text(data, size_t(n > 0 ? n : 0));
  BIO_free(bio);
  return text;
}

// Words for a certificate check's result on `cert` (may be null), presented by `whose`.
std::string describe_verify_result(long result, X509* cert, const std::string& whose) {
  switch (result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return fmt::format("{} certificate has expired (not valid after {})", whose,
                         cert ? time_text(X509_get0_notAfter(cert)) : "?");
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return fmt::format("{} certificate is not yet valid (not before {})", whose,
                         cert ? time_text(X509_get0_notBefore(cert)) : "?");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return fmt::format("{} certificate is not signed by the cluster CA ({})", whose,
                         X509_verify_cert_error_string(result));
    default:
      return fmt::format("{} certificate was refused: {}", whose, X509_verify_cert_error_string(result));
  }
}

// The certificate in `cert_file` checked against the CA store of `ctx`: signed by it and valid now.
Status check_own_certificate(SSL_CTX* ctx, const TlsFiles& files) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (!cert) return Status::invalid(fmt::format("--tls-cert '{}' holds no certificate", files.cert_file));
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(ctx), cert, nullptr);
  const bool ok = X509_verify_cert(check) == 1;
  const long result = X509_STORE_CTX_get_error(check);
  X509_STORE_CTX_free(check);
  if (ok) return Status::ok();
  return Status::invalid(fmt::format("--tls-cert '{}': {} (--tls-ca-file '{}')", files.cert_file,
                                     describe_verify_result(result, cert, "this"), files.ca_file));
}

// OpenSSL keeps the peer's certificate only once it is verified: the one that failed is kept here
// (an extra reference on the SSL, freed with it) so that the failure can name its dates.
int failed_cert_index() {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void*, void* cert, CRYPTO_EX_DATA*, int, long, void*) {
        if (cert) X509_free(static_cast<X509*>(cert));
      });
  return index;
}

int remember_failed_cert(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok) return preverify_ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  if (ssl && cert && !SSL_get_ex_data(ssl, failed_cert_index())) {
    X509_up_ref(cert);
    SSL_set_ex_data(ssl, failed_cert_index(), cert);
  }
  return preverify_ok;
}

// The three files given together, readable, and the key not open to every user.
Status check_tls_files(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty())
    return Status::invalid(files.cert_file.empty() ? "--tls-key given without --tls-cert"
                                                   : "--tls-cert given without --tls-key");
  if (files.ca_file.empty())
    return Status::invalid("TLS needs --tls-ca-file (the cluster CA that signs every peer's certificate)");
  if (files.cert_file.empty())
    return Status::invalid("--tls-ca-file needs --tls-cert and --tls-key (every peer of a TLS cluster "
                           "proves itself with a certificate)");
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--tls-ca-file", files.ca_file},
                                   {"--tls-cert", files.cert_file}, {"--tls-key", files.key_file}})
    if (Status st = readable(flag, path); !st) return st;
  struct stat st {};
  if (stat(files.key_file.c_str(), &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)))
    return Status::invalid(fmt::format("--tls-key '{}' is readable or writable by every user (mode {:04o}); "
                                       "chmod 600 it", files.key_file, st.st_mode & 07777));
  return Status::ok();
}

}  // namespace

StatusOr<std::shared_ptr<ssl::context>> make_tls_context(const TlsFiles& files, TlsRole role) {
  if (Status st = check_tls_files(files); !st) return st;
  auto ctx = std::make_shared<ssl::context>(role == TlsRole::kClient ? ssl::context::tls_client
                                                                     : ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(native, files.ca_file.c_str(), nullptr) != 1)
    return Status::invalid(fmt::format("--tls-ca-file '{}' holds no usable CA certificate: {}",
                                       files.ca_file, openssl_error()));
  // The key first: a certificate loaded after it drops a key that does not match, which
  // SSL_CTX_check_private_key then reports as such (the other order fails with "key values mismatch").
  if (SSL_CTX_use_PrivateKey_file(native, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return Status::invalid(fmt::format("--tls-key '{}' holds no usable private key: {}", files.key_file,
                                       openssl_error()));
  if (SSL_CTX_use_certificate_chain_file(native, files.cert_file.c_str()) != 1)
    return Status::invalid(fmt::format("--tls-cert '{}' holds no usable certificate: {}", files.cert_file,
                                       openssl_error()));
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return Status::invalid(fmt::format("--tls-key '{}' does not match the certificate in --tls-cert '{}'",
                                       files.key_file, files.cert_file));
  }
  if (Status st = check_own_certificate(native, files); !st) return st;
  // The CA's own certificate (and key) given as this peer's: it verifies against itself, and the
  // other end refuses it with "sslv3 alert unsupported certificate".
  if (X509_check_ca(SSL_CTX_get0_certificate(native)) == 1)
    return Status::invalid(fmt::format("--tls-cert '{}' is a CA certificate (the cluster CA itself?): give "
                                       "this host's own certificate, signed by the CA "
                                       "(deploy/make-certs.sh DIR NAME makes one)", files.cert_file));
  // Mutual: a server without the peer's certificate ends the handshake. Membership of the cluster
  // is the CA's signature, not a host name (workers connect by address, often an IP).
  if (role == TlsRole::kHttpsServer) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, remember_failed_cert);
  if (role == TlsRole::kServer) {
    // The CA's name in the CertificateRequest, so that a client with several identities picks ours.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.ca_file.c_str());
    if (names) SSL_CTX_set_client_CA_list(native, names);
  }
  ERR_clear_error();
  return ctx;
}

StatusOr<Address> scheduler_address(const std::string& text, bool tls_configured) {
  auto address = parse_address(text);
  if (!address) return address.status();
  switch (address->scheme) {
    case Scheme::kTls:
      if (!tls_configured)
        return Status::invalid(fmt::format("{} is a TLS address: give --tls-ca-file, --tls-cert and --tls-key",
                                           address->to_string()));
      break;
    case Scheme::kTcp:
      if (tls_configured) {
        Address tls = *address;
        tls.scheme = Scheme::kTls;
        return Status::invalid(fmt::format("--tls-* given, but {} asks for plain TCP: use {}",
                                           address->to_string(), tls.to_string()));
      }
      break;
    case Scheme::kUnspecified:
      address->scheme = tls_configured ? Scheme::kTls : Scheme::kTcp;
      break;
  }
  return address;
}

bool is_tls_refusal(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category();
}

std::string describe_tls_failure(const boost::system::error_code& ec, SSL* ssl, const std::string& peer) {
  if (ec == boost::asio::error::eof || ec == ssl::error::stream_truncated)
    return fmt::format("{} closed the connection during the TLS handshake", peer);
  if (!is_tls_refusal(ec)) return ec.message();
  switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED: {
      X509* cert = ssl ? static_cast<X509*>(SSL_get_ex_data(ssl, failed_cert_index())) : nullptr;
      if (!cert && ssl) cert = SSL_get0_peer_certificate(ssl);
      const long result = ssl ? SSL_get_verify_result(ssl) : X509_V_ERR_UNSPECIFIED;
      return describe_verify_result(result, cert, peer + "'s");
    }
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      return fmt::format("{} presented no certificate (every peer of a TLS cluster needs --tls-cert and "
                         "--tls-key)", peer);
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return fmt::format("{} refused our certificate: it is not signed by {}'s CA", peer, peer);
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
      return fmt::format("{} refused our certificate: expired or not yet valid", peer);
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return fmt::format("{} requires a client certificate and we sent none", peer);
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return fmt::format("{} refused our certificate", peer);
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_RECORD_LENGTH_MISMATCH:
      return fmt::format("{} does not speak TLS (a plain tcp:// port?)", peer);
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return fmt::format("no TLS version in common with {} (TLS 1.2 at least)", peer);
    default:
      return fmt::format("TLS with {} failed: {}", peer, ec.message());
  }
}

}  // namespace psched
