#include "agent/trainer_status.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/json.h"

namespace distjob {
namespace {

absl::Status ParseUrl(const std::string& url, TrainerStatusConfig* config) {
  const std::string accepted = absl::StrCat(
      kTrainerServerUrlEnv, "=", url,
      ": give https://HOST[:PORT]/PATH (the TrainJob status endpoint)");
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "https://")) {
    return absl::InvalidArgumentError(accepted);
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  config->path =
      slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.empty() || authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(accepted);
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(accepted);
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return absl::InvalidArgumentError(accepted);
    }
    port = after;
    if (!after.empty() && port.empty()) {
      return absl::InvalidArgumentError(accepted);
    }
  } else if (const size_t colon = authority.rfind(':');
             colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return absl::InvalidArgumentError(accepted);
  }
  if (host.empty()) return absl::InvalidArgumentError(accepted);
  config->host = std::string(host);
  config->port = 443;
  if (!port.empty()) {
    int value = 0;
    if (!absl::SimpleAtoi(port, &value) || value < 1 || value > 65535) {
      return absl::InvalidArgumentError(accepted);
    }
    config->port = value;
  }
  return absl::OkStatus();
}

absl::Status CheckCaFile(const std::string& path) {
  const std::string accepted =
      absl::StrCat(kTrainerServerCaCertEnv, "=", path,
                   ": cannot load it; give a file of PEM CA certificates");
  X509_STORE* store = X509_STORE_new();
  if (store == nullptr) return absl::InternalError(accepted);
  ERR_clear_error();
  const int loaded = X509_STORE_load_file(store, path.c_str());
  ERR_clear_error();
  X509_STORE_free(store);
  if (loaded != 1) return absl::InvalidArgumentError(accepted);
  return absl::OkStatus();
}

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

absl::StatusOr<std::string> MetricValue(const Json& value,
                                        const std::string& invalid) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return DumpJson(value);
  if (value.is_number()) return FormatNumber(value.get<double>());
  if (value.is_boolean()) return std::string(value.get<bool>() ? "1" : "0");
  return absl::InvalidArgumentError(invalid);
}

}  // namespace

absl::StatusOr<std::optional<TrainerStatusConfig>> TrainerStatusConfigFromEnv(
    const EnvMap& env, std::string* warning) {
  const char* const names[] = {kTrainerServerUrlEnv, kTrainerServerCaCertEnv,
                               kTrainerServerTokenEnv};
  std::vector<std::string> present, missing;
  for (const char* name : names) {
    const auto found = env.find(name);
    (found != env.end() && !found->second.empty() ? present : missing)
        .push_back(name);
  }
  if (present.empty()) return std::nullopt;
  if (!missing.empty()) {
    *warning = absl::StrCat(
        "Trainer status push off: ", absl::StrJoin(present, ", "),
        present.size() == 1 ? " is" : " are", " set but ",
        absl::StrJoin(missing, ", "), missing.size() == 1 ? " is" : " are",
        " not; the job runs without posting progress");
    return std::nullopt;
  }
  TrainerStatusConfig config;
  config.url = env.at(kTrainerServerUrlEnv);
  config.ca_cert_file = env.at(kTrainerServerCaCertEnv);
  config.token_file = env.at(kTrainerServerTokenEnv);
  if (absl::Status status = ParseUrl(config.url, &config); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckCaFile(config.ca_cert_file); !status.ok()) {
    return status;
  }
  return config;
}

absl::StatusOr<TrainerProgress> ParseTrainerProgress(absl::string_view text,
                                                     absl::string_view path) {
  absl::StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return parsed.status();
  const std::string prefix = absl::StrCat(path, ": ");
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "give a JSON object"));
  }
  TrainerProgress progress;
  if (auto it = parsed->find("progressPercentage"); it != parsed->end()) {
    if (!it->is_number() || !(it->get<double>() >= 0) ||
        it->get<double>() > 100) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "progressPercentage: give a number from 0 to 100"));
    }
    progress.percentage = it->get<double>();
  }
  if (auto it = parsed->find("estimatedRemainingSeconds");
      it != parsed->end()) {
    const bool whole = it->is_number_integer() ||
                       (it->is_number_float() &&
                        std::floor(it->get<double>()) == it->get<double>() &&
                        std::fabs(it->get<double>()) < 9e15);
    if (!whole || it->get<double>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "estimatedRemainingSeconds: give a whole number >= 0"));
    }
    progress.remaining_seconds = static_cast<int64_t>(it->get<double>());
  }
  if (auto it = parsed->find("metrics"); it != parsed->end()) {
    const std::string invalid = absl::StrCat(
        prefix,
        "metrics: give an object of name to number or string, or a list of "
        "{\"name\", \"value\"}");
    if (it->is_object()) {
      for (const auto& [name, value] : it->items()) {
        absl::StatusOr<std::string> text_value = MetricValue(value, invalid);
        if (!text_value.ok()) return text_value.status();
        progress.metrics.emplace_back(name, *std::move(text_value));
      }
    } else if (it->is_array()) {
      for (const Json& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") ||
            !entry["name"].is_string() || !entry.contains("value")) {
          return absl::InvalidArgumentError(invalid);
        }
        absl::StatusOr<std::string> text_value =
            MetricValue(entry["value"], invalid);
        if (!text_value.ok()) return text_value.status();
        progress.metrics.emplace_back(entry["name"].get<std::string>(),
                                      *std::move(text_value));
      }
    } else {
      return absl::InvalidArgumentError(invalid);
    }
  }
  return progress;
}

std::string TrainerStatusBody(const AgentStatusSnapshot& agent,
                              const TrainerProgress& progress, absl::Time now) {
  Json status = Json::object();
  if (progress.percentage) {
    // Trainer v2 shows a whole percentage (its PROGRESS column).
    status["progressPercentage"] =
        static_cast<int>(std::floor(*progress.percentage));
  }
  if (progress.remaining_seconds) {
    status["estimatedRemainingSeconds"] = *progress.remaining_seconds;
  }
  Json metrics = Json::array();
  auto add = [&metrics](const std::string& name, const std::string& value) {
    metrics.push_back(Json{{"name", name}, {"value", value}});
  };
  add("distjob_phase", agent.phase);
  add("distjob_restarts", absl::StrCat(agent.restarts));
  add("distjob_attempt", absl::StrCat(agent.attempt));
  if (agent.last_exit_code) {
    add("distjob_last_exit_code", absl::StrCat(*agent.last_exit_code));
  }
  if (!agent.last_exit_class.empty()) {
    add("distjob_last_exit_class", agent.last_exit_class);
  }
  for (const auto& [name, value] : progress.metrics) add(name, value);
  status["metrics"] = std::move(metrics);
  status["lastUpdatedTime"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  Json body = Json::object();
  body["trainerStatus"] = std::move(status);
  return DumpJson(body);
}

}  // namespace distjob
