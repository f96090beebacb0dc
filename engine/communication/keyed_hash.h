// The pieces of a challenge-response, for the TCP rendezvous (engine/communication/tcp_rendezvous.h): SHA-256
// and HMAC-SHA-256 (FIPS 180-4, RFC 2104), a comparison of digests that takes the same time
// wherever they differ, and fresh random bytes from the kernel for the nonces. No other cryptography
// lives in dpbench: nothing is encrypted, a shared secret only proves that a peer knows it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpbench {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::string_view bytes);
Digest hmac_sha256(std::string_view key, std::string_view message);

// Whether `a` and `b` hold the same bytes, looking at every byte whatever the first difference.
bool same_bytes(std::string_view a, std::string_view b);

// `count` bytes from the kernel's random source (getrandom); RuntimeError when it has none.
std::string random_bytes(size_t count);

std::string digest_bytes(const Digest& digest);  // the digest as 32 bytes of a string
std::string hex(std::string_view bytes);         // lower-case hex, two digits a byte

}  // namespace dpbench
