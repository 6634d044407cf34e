#include "rendezvous/store/store_credentials.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

class StoreCredentialsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = std::string(::testing::TempDir()) + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return path;
  }
  static bool Mentions(const absl::Status& s, const std::string& text) {
    return s.message().find(text) != absl::string_view::npos;
  }
};

TEST_F(StoreCredentialsTest, TokenFileDropsOneTrailingNewline) {
  EXPECT_EQ(*LoadTokenFile(Write("t1", "abc-123\n")), "abc-123");
  EXPECT_EQ(*LoadTokenFile(Write("t2", "abc-123\r\n")), "abc-123");
  EXPECT_EQ(*LoadTokenFile(Write("t3", "abc-123")), "abc-123");
}

TEST_F(StoreCredentialsTest, BadTokenFilesNameTheFileAndNeverTheSecret) {
  const std::string missing = Write("dir-probe", "x") + ".missing";
  auto s = LoadTokenFile(missing).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(Mentions(s, missing)) << s;
  const std::string empty = Write("empty", "");
  EXPECT_TRUE(Mentions(LoadTokenFile(empty).status(), "empty"));
  const std::string big = Write("big", std::string(kMaxTokenBytes + 3, 'a'));
  s = LoadTokenFile(big).status();
  EXPECT_TRUE(Mentions(s, big) && Mentions(s, "larger")) << s;
  const std::string spaced = Write("spaced", "hidden secret\n");
  s = LoadTokenFile(spaced).status();
  EXPECT_TRUE(Mentions(s, spaced) && Mentions(s, "printable")) << s;
  EXPECT_FALSE(Mentions(s, "hidden")) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(
      LoadTokenFile(::testing::TempDir()).status()));  // a directory
}

TEST_F(StoreCredentialsTest, FileWinsOverVariableAndVariableIsChecked) {
  StoreSecurityOptions o;
  o.token_env = "from-env";
  EXPECT_EQ(LoadStoreSecurity(o)->token, "from-env");
  o.token_file = Write("tok", "from-file\n");
  EXPECT_EQ(LoadStoreSecurity(o)->token, "from-file");
  o.token_file.clear();
  o.token_env = "two words";
  auto s = LoadStoreSecurity(o).status();
  EXPECT_TRUE(Mentions(s, "DISTJOB_RDZV_TOKEN")) << s;
  EXPECT_FALSE(Mentions(s, "words")) << s;
  EXPECT_TRUE(LoadStoreSecurity({})->token.empty());
}

TEST_F(StoreCredentialsTest, TokenComparison) {
  EXPECT_TRUE(TokenMatches("Bearer abc", "abc"));
  EXPECT_FALSE(TokenMatches("Bearer abd", "abc"));
  EXPECT_FALSE(TokenMatches("Bearer ab", "abc"));
  EXPECT_FALSE(TokenMatches("Bearer abcd", "abc"));
  EXPECT_FALSE(TokenMatches("abc", "abc"));
  EXPECT_FALSE(TokenMatches("", "abc"));
  EXPECT_TRUE(TokenMatches("", ""));  // no token configured: open store
}

TEST_F(StoreCredentialsTest, CallTokenCheckNamesTheServerNeverTheToken) {
  std::multimap<grpc::string_ref, grpc::string_ref> md;
  EXPECT_TRUE(CheckCallToken(md, "", "this server").ok());  // none required
  auto s = CheckCallToken(md, "abc", "this spawn server");
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_EQ(s.message(), "this spawn server requires the job's token");
  md.emplace("authorization", "Bearer abd");
  s = CheckCallToken(md, "abc", "this spawn server");
  EXPECT_EQ(s.message(), "this spawn server refused the token");
  md.clear();
  md.emplace("authorization", "Bearer abc");
  EXPECT_TRUE(CheckCallToken(md, "abc", "this spawn server").ok());
}

TEST_F(StoreCredentialsTest, TlsFilesThatDoNotLoadNameTheFileAndReason) {
  StoreSecurityOptions o;
  o.tls_cert = Write("cert.pem", "not a certificate\n");
  auto s = LoadStoreSecurity(o).status();
  EXPECT_TRUE(Mentions(s, "--rdzv-tls-key")) << s;  // a cert needs its key
  o.tls_key = Write("key.pem", "not a key\n");
  s = LoadStoreSecurity(o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(Mentions(s, o.tls_cert) && Mentions(s, "not a PEM certificate"))
      << s;
  o.tls_cert = o.tls_cert + ".missing";
  s = LoadStoreSecurity(o).status();
  EXPECT_TRUE(Mentions(s, o.tls_cert) && Mentions(s, "cannot open")) << s;
  StoreSecurityOptions ca_only;
  ca_only.tls_ca = Write("ca.pem", "x");
  s = LoadStoreSecurity(ca_only).status();
  EXPECT_TRUE(Mentions(s, "--rdzv-tls-ca needs --rdzv-tls-cert")) << s;
}

}  // namespace
}  // namespace distjob
