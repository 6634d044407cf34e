#include "rendezvous/store/server/h2_first_bytes.h"

#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string Frame(char type, uint32_t stream, const std::string& payload) {
  std::string f;
  f.push_back(static_cast<char>((payload.size() >> 16) & 0xff));
  f.push_back(static_cast<char>((payload.size() >> 8) & 0xff));
  f.push_back(static_cast<char>(payload.size() & 0xff));
  f.push_back(type);
  f.push_back(0);
  for (int shift = 24; shift >= 0; shift -= 8) {
    f.push_back(static_cast<char>((stream >> shift) & 0xff));
  }
  return f + payload;
}

TEST(FirstHeadersStreamTest, NotHttp2) {
  EXPECT_EQ(FirstHeadersStream("\x16\x03\x01"), -1);  // a TLS ClientHello
  EXPECT_EQ(FirstHeadersStream("GET / HTTP/1.1\r\n"), -1);
}

TEST(FirstHeadersStreamTest, WaitsForThePrefaceAndAHeadersFrame) {
  const std::string preface(kH2Preface, kH2PrefaceLen);
  EXPECT_EQ(FirstHeadersStream(""), 0);
  EXPECT_EQ(FirstHeadersStream(preface.substr(0, 5)), 0);
  EXPECT_EQ(FirstHeadersStream(preface), 0);
  const std::string settings = Frame(0x4, 0, std::string(6, '\0'));
  EXPECT_EQ(FirstHeadersStream(preface + settings), 0);
  const std::string headers = Frame(0x1, 7, "abc");
  EXPECT_EQ(FirstHeadersStream(preface + settings + headers.substr(0, 8)), 0);
  EXPECT_EQ(FirstHeadersStream(preface + settings + headers), 7);
}

TEST(FirstHeadersStreamTest, ReservedBitOfTheStreamIsIgnored) {
  const std::string preface(kH2Preface, kH2PrefaceLen);
  EXPECT_EQ(FirstHeadersStream(preface + Frame(0x1, 0x80000003u, "")), 3);
}

TEST(FirstHeadersStreamTest, AHugeFrameLengthOnlyWaits) {
  const std::string preface(kH2Preface, kH2PrefaceLen);
  std::string big = Frame(0x0, 1, "");
  big[0] = big[1] = big[2] = '\xff';
  EXPECT_EQ(FirstHeadersStream(preface + big + Frame(0x1, 1, "")), 0);
}

}  // namespace
}  // namespace distjob
