// SHA-256 and HMAC-SHA-256 against the published test vectors (FIPS 180-4's examples, RFC 4231),
// including messages whose padding spills into a second block; the digest comparison; the
// kernel's random bytes.
#include <catch2/catch.hpp>

#include <string>

#include "engine/communication/keyed_hash.h"

using namespace dpbench;

namespace {

std::string sha256_hex(const std::string& message) { return hex(digest_bytes(sha256(message))); }
std::string hmac_hex(const std::string& key, const std::string& message) {
  return hex(digest_bytes(hmac_sha256(key, message)));
}

}  // namespace

TEST_CASE("SHA-256 of the standard's examples and of messages at the block edges", "[keyed_hash]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 55 bytes: the length still fits the last block; 56: it takes another; 64 and 1000: whole blocks.
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(sha256_hex(std::string(1000, 'a')) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST_CASE("HMAC-SHA-256 of RFC 4231's cases, a key longer than a block, and the empty key", "[keyed_hash]") {
  CHECK(hmac_hex(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hmac_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hmac_hex("", "") == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("digests compare whole, and random bytes differ from call to call", "[keyed_hash]") {
  CHECK(same_bytes("abc", "abc"));
  CHECK(!same_bytes("abc", "abd"));
  CHECK(!same_bytes("abc", "ab"));
  CHECK(same_bytes("", ""));
  const std::string first = random_bytes(32), second = random_bytes(32);
  CHECK(first.size() == 32);
  CHECK(first != second);
  CHECK(hex(std::string("\x00\xff\x10", 3)) == "00ff10");
}
