#include "observability/trainer_status.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "common/json.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr) << path;
  std::fputs(text.c_str(), file);
  std::fclose(file);
}

// A self-signed certificate made in memory, so no key or certificate is
// committed.
std::string WriteCaCertificate(const std::string& name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("test CA"),
                             -1, -1, 0);
  X509_set_issuer_name(cert, subject);
  X509_sign(cert, key, EVP_sha256());
  const std::string path = TempPath(name);
  FILE* file = std::fopen(path.c_str(), "w");
  PEM_write_X509(file, cert);
  std::fclose(file);
  X509_free(cert);
  EVP_PKEY_free(key);
  return path;
}

std::string TokenFile() {
  const std::string path = TempPath("token");
  WriteFile(path, "tok-123\n");
  return path;
}

EnvMap FullEnv(const std::string& url, const std::string& ca) {
  return {{kTrainerServerUrlEnv, url},
          {kTrainerServerCaCertEnv, ca},
          {kTrainerServerTokenEnv, TokenFile()}};
}

TEST(TrainerStatusConfigTest, NoVariablesMeansNoPush) {
  std::string warning;
  auto config = TrainerStatusConfigFromEnv({{"PATH", "/bin"}}, &warning);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->has_value());
  EXPECT_EQ(warning, "");
}

TEST(TrainerStatusConfigTest, PartialSetWarnsAndPushesNothing) {
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(
      {{kTrainerServerUrlEnv, "not even a url"}}, &warning);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->has_value());
  EXPECT_EQ(warning,
            "Trainer status push off: KUBEFLOW_TRAINER_SERVER_URL is set but "
            "KUBEFLOW_TRAINER_SERVER_CA_CERT, KUBEFLOW_TRAINER_SERVER_TOKEN "
            "are not; the job runs without posting progress");
}

TEST(TrainerStatusConfigTest, ParsesHttpsUrl) {
  const std::string ca = WriteCaCertificate("ca_ok.pem");
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(
      FullEnv("https://trainer.kubeflow.svc:8443/apis/trainer.kubeflow.org/"
              "v1alpha1/namespaces/ns/trainjobs/job/status",
              ca),
      &warning);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_value());
  EXPECT_EQ((*config)->host, "trainer.kubeflow.svc");
  EXPECT_EQ((*config)->port, 8443);
  EXPECT_EQ((*config)->path,
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/"
            "status");
  EXPECT_EQ((*config)->token_file, TokenFile());
  EXPECT_EQ(warning, "");

  config = TrainerStatusConfigFromEnv(FullEnv("https://[::1]/s", ca), &warning);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->host, "::1");
  EXPECT_EQ((*config)->port, 443);
  EXPECT_EQ((*config)->path, "/s");
}

TEST(TrainerStatusConfigTest, RejectsUrlThatIsNotHttps) {
  const std::string ca = WriteCaCertificate("ca_url.pem");
  for (const char* url :
       {"http://trainer/status", "https://", "https:///x", "https://host:0/x",
        "https://host:99999/x", "https://host:/x", "https://user@host/x"}) {
    std::string warning;
    auto config = TrainerStatusConfigFromEnv(FullEnv(url, ca), &warning);
    ASSERT_FALSE(config.ok()) << url;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(config.status().message(),
              std::string("KUBEFLOW_TRAINER_SERVER_URL=") + url +
                  ": give https://HOST[:PORT]/PATH (the TrainJob status "
                  "endpoint)");
  }
}

// The CA file is read once, when the variables are checked: the poster
// uses what was loaded then (a file replaced or removed since changes
// nothing).
TEST(TrainerStatusConfigTest, ThePosterUsesTheCaLoadedWithTheConfig) {
  const std::string ca = WriteCaCertificate("ca_once.pem");
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(
      FullEnv("https://localhost:1/status", ca), &warning);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_value());
  ASSERT_EQ(std::remove(ca.c_str()), 0);
  auto poster = TrainerStatusPoster::Start(**std::move(config));
  EXPECT_TRUE(poster.ok()) << poster.status();
}

TEST(TrainerStatusConfigTest, RejectsCaFileThatDoesNotLoad) {
  const std::string garbage = TempPath("garbage.pem");
  WriteFile(garbage, "not a certificate\n");
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(
      FullEnv("https://localhost:1/status", garbage), &warning);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            "KUBEFLOW_TRAINER_SERVER_CA_CERT=" + garbage +
                ": cannot load it; give a file of PEM CA certificates");
  const std::string missing = TempPath("missing.pem");
  config = TrainerStatusConfigFromEnv(
      FullEnv("https://localhost:1/status", missing), &warning);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("KUBEFLOW_TRAINER_SERVER_CA_CERT '" +
                                           missing + "': cannot open"),
            std::string::npos)
      << config.status();
}

TEST(TrainerTokenTest, OneTrailingNewlineIsDropped) {
  const std::string path = TempPath("token_nl");
  for (const char* text : {"abc\n", "abc\r\n", "abc"}) {
    WriteFile(path, text);
    auto token = LoadTrainerToken(path);
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_EQ(*token, "abc");
  }
}

// A token with control bytes went out raw, or as no header at all.
TEST(TrainerTokenTest, ControlCharactersAreRefusedNamingTheFileNotTheToken) {
  const std::string path = TempPath("token_bad");
  for (const char* text : {"sec\r\nret\n", "secret\n\n", "sec ret", "sec\tret",
                           "", "\n", "sec\x7fret"}) {
    WriteFile(path, text);
    auto token = LoadTrainerToken(path);
    ASSERT_FALSE(token.ok()) << text;
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(token.status().message().find(
                  std::string(kTrainerServerTokenEnv) + " '" + path + "'"),
              std::string::npos)
        << token.status();
    EXPECT_EQ(token.status().message().find("sec"), std::string::npos)
        << token.status();
  }
}

TEST(TrainerTokenTest, TheConfigRefusesABadTokenFile) {
  const std::string ca = WriteCaCertificate("ca_token.pem");
  EnvMap env = FullEnv("https://localhost:1/status", ca);
  const std::string bad = TempPath("token_crlf");
  WriteFile(bad, "a\r\nb\n");
  env[kTrainerServerTokenEnv] = bad;
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(env, &warning);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(bad), std::string::npos);
}

TEST(TrainerProgressTest, ParsesObjectAndListMetrics) {
  auto progress = ParseTrainerProgress(
      R"({"progressPercentage": 42.5, "estimatedRemainingSeconds": 120,
          "metrics": {"loss": 0.25, "step": 100, "stage": "warmup"}})",
      "p.json");
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->percentage, 42.5);
  EXPECT_EQ(progress->remaining_seconds, 120);
  ASSERT_EQ(progress->metrics.size(), 3u);
  EXPECT_EQ(progress->metrics[0].first, "loss");
  EXPECT_EQ(progress->metrics[0].second, "0.25");
  EXPECT_EQ(progress->metrics[1].second, "100");
  EXPECT_EQ(progress->metrics[2].second, "warmup");

  progress = ParseTrainerProgress(
      R"({"metrics": [{"name": "accuracy", "value": "0.9"}]})", "p.json");
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_FALSE(progress->percentage.has_value());
  ASSERT_EQ(progress->metrics.size(), 1u);
  EXPECT_EQ(progress->metrics[0].first, "accuracy");
  EXPECT_EQ(progress->metrics[0].second, "0.9");
}

TEST(TrainerProgressTest, RejectsWhatItCannotRelay) {
  for (const char* text :
       {"", "{", "[]", R"({"progressPercentage": 101})",
        R"({"progressPercentage": "50"})",
        R"({"estimatedRemainingSeconds": -1})",
        R"({"estimatedRemainingSeconds": 1.5})", R"({"metrics": 3})",
        R"({"metrics": [{"value": 1}]})", R"({"metrics": {"a": [1]}})"}) {
    auto progress = ParseTrainerProgress(text, "/run/progress.json");
    ASSERT_FALSE(progress.ok()) << text;
    EXPECT_EQ(progress.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(progress.status().message().find("/run/progress.json"),
              std::string::npos)
        << progress.status();
  }
}

TEST(TrainerStatusBodyTest, AgentStateAndWorkerProgress) {
  AgentStatusSnapshot agent;
  agent.phase = "running";
  agent.restarts = 2;
  agent.attempt = 3;
  agent.last_exit_code = 137;
  agent.last_exit_class = "retryable";
  TrainerProgress progress;
  progress.percentage = 42.9;
  progress.remaining_seconds = 60;
  progress.metrics = {{"loss", "0.25"}};
  EXPECT_EQ(
      TrainerStatusBody(agent, progress, absl::FromUnixSeconds(1700000000)),
      R"({"trainerStatus":{"progressPercentage":42,)"
      R"("estimatedRemainingSeconds":60,"metrics":[)"
      R"({"name":"distjob_phase","value":"running"},)"
      R"({"name":"distjob_restarts","value":"2"},)"
      R"({"name":"distjob_attempt","value":"3"},)"
      R"({"name":"distjob_last_exit_code","value":"137"},)"
      R"({"name":"distjob_last_exit_class","value":"retryable"},)"
      R"({"name":"loss","value":"0.25"}],)"
      R"("lastUpdatedTime":"2023-11-14T22:13:20Z"}})");
}

TEST(TrainerStatusBodyTest, LeavesOutWhatIsUnknown) {
  AgentStatusSnapshot agent;
  agent.phase = "rendezvous";
  EXPECT_EQ(TrainerStatusBody(agent, {}, absl::FromUnixSeconds(0)),
            R"({"trainerStatus":{"metrics":[)"
            R"({"name":"distjob_phase","value":"rendezvous"},)"
            R"({"name":"distjob_restarts","value":"0"},)"
            R"({"name":"distjob_attempt","value":"0"}],)"
            R"("lastUpdatedTime":"1970-01-01T00:00:00Z"}})");
}

}  // namespace
}  // namespace distjob
