// Mutual TLS between the daemons and clients (docs/design.md, "Discovery and security"): every peer
// holds a certificate and key signed by the cluster CA and checks the other side's against it.
// The settings are checked whole at start (a partial or inconsistent set stops the program with one
// line, never a silent fallback to plain TCP), and a failed handshake is put in words on both ends.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <string>

#include "core/status.h"
#include "net/address.h"

typedef struct ssl_st SSL;

namespace psched {

// The three files of --tls-ca-file, --tls-cert and --tls-key (PEM).
struct TlsFiles {
  std::string ca_file, cert_file, key_file;
  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// kServer and kClient verify the peer (mutual TLS); kHttpsServer (the dashboard) proves itself with
// the same certificate but asks browsers and Prometheus for none: the cluster token guards it.
enum class TlsRole : uint8_t { kServer, kClient, kHttpsServer };

// A context for `role`, or why not: a file missing or unreadable, a key others can read, a key that
// does not match its certificate, a certificate the CA did not sign or that is out of its validity
// period. Verifies the peer (mutual: a server demands a client certificate), TLS 1.2 at least.
StatusOr<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const TlsFiles& files, TlsRole role);

// The scheduler's address as a worker or client connects to it: `text` parsed, its scheme decided
// by whether TLS is configured. tls:// needs TLS; tcp:// with it is refused (a client that meant
// TLS must not silently talk in the clear); an address without a scheme uses TLS exactly when it is
// configured. The result's scheme is kTls or kTcp; a refusal is kInvalid.
StatusOr<Address> scheduler_address(const std::string& text, bool tls_configured);

// Why a TLS operation failed, in words, from the side that saw `ec`; `peer` names the other end
// ("the scheduler", "the peer"). `ssl` (may be null) gives the certificate check's result.
std::string describe_tls_failure(const boost::system::error_code& ec, SSL* ssl, const std::string& peer);

// True when `ec` is a refusal by TLS itself (a certificate, a protocol mismatch): retrying with the
// same settings cannot succeed. A connection that merely dropped is not.
bool is_tls_refusal(const boost::system::error_code& ec);

// The first byte of a TLS record carrying a handshake. A psched frame starts with its length, a
// multiple of 8, so its first byte is never this: one byte tells the two protocols apart.
inline constexpr unsigned char kTlsHandshakeRecord = 0x16;

// What each side is told when the other speaks the other protocol.
inline constexpr const char* kSchedulerSpeaksTls =
    "the scheduler speaks TLS: connect with a tls:// address and --tls-ca-file, --tls-cert, --tls-key";
inline constexpr const char* kPlainPeerOnTlsPort = "a plain-TCP peer on the TLS port (it must use tls://)";
inline constexpr const char* kSchedulerSpeaksPlain =
    "a TLS peer on a plain-TCP port: this scheduler does not speak TLS (use tcp:// without --tls-*, "
    "or start psched with --tls-ca-file, --tls-cert and --tls-key)";

}  // namespace psched
