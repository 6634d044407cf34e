#include "observability/trainer_status.h"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"

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
  // The path goes into the request line as is: a space or control byte
  // there would end it (or add headers) early.
  for (const char c : url) {
    if (c <= ' ' || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(kTrainerServerUrlEnv,
                       ": has a space, control or non-ASCII byte; give "
                       "https://HOST[:PORT]/PATH with any such byte "
                       "percent-encoded"));
    }
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

// The one place the CA file is loaded and its error worded. Read through
// the one input reader (a FIFO there must not hang the start), then parsed
// from memory.
absl::StatusOr<std::shared_ptr<X509_STORE>> LoadCaStore(
    const std::string& path) {
  absl::StatusOr<std::string> pem =
      ReadInputFile(kTrainerServerCaCertEnv, path, size_t{1} << 20);
  if (!pem.ok()) return pem.status();
  const std::string accepted =
      absl::StrCat(kTrainerServerCaCertEnv, "=", path,
                   ": cannot load it; give a file of PEM CA certificates");
  std::shared_ptr<X509_STORE> store(X509_STORE_new(), X509_STORE_free);
  if (store == nullptr) return absl::InternalError(accepted);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())), BIO_free);
  int loaded = 0;
  while (bio != nullptr) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    if (X509_STORE_add_cert(store.get(), cert) == 1) ++loaded;
    X509_free(cert);
  }
  ERR_clear_error();
  if (loaded == 0) return absl::InvalidArgumentError(accepted);
  return store;
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

timeval BoundTimeval(absl::Duration d) {
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(d));
  return timeval{static_cast<time_t>(ms / 1000),
                 static_cast<suseconds_t>(ms % 1000 * 1000)};
}

}  // namespace

absl::StatusOr<std::string> LoadTrainerToken(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadInputFile(kTrainerServerTokenEnv, path, kMaxTrainerTokenBytes + 2);
  if (!text.ok()) return text.status();
  absl::string_view token = *text;
  // One trailing newline is how a Secret file often ends; nothing else
  // but the token's own characters is sent.
  if (absl::ConsumeSuffix(&token, "\n")) absl::ConsumeSuffix(&token, "\r");
  const std::string source = FileLabel(kTrainerServerTokenEnv, path);
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no token"));
  }
  if (token.size() > kMaxTrainerTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the token is longer than ",
                     kMaxTrainerTokenBytes, " bytes"));
  }
  for (const char c : token) {
    if (c < 0x21 || c > 0x7e) {
      // Never echo the secret, not even a character of it.
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": the token must be one line of printable ASCII without spaces "
          "or control characters"));
    }
  }
  return std::string(token);
}

std::string ProgressDirTemplate(absl::string_view tmpdir) {
  return absl::StrCat(tmpdir.empty() ? "/tmp" : tmpdir,
                      "/distjob-progress-XXXXXX");
}

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
  auto ca = LoadCaStore(config.ca_cert_file);
  if (!ca.ok()) return ca.status();
  config.ca_store = *std::move(ca);
  // Checked now, though read again for each post (it rotates): a token
  // that cannot be sent is a configuration error, not a warning a minute.
  if (auto token = LoadTrainerToken(config.token_file); !token.ok()) {
    return token.status();
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

absl::StatusOr<std::unique_ptr<TrainerStatusPoster>> TrainerStatusPoster::Start(
    TrainerStatusConfig config, TrainerPosterOptions options) {
  std::unique_ptr<TrainerStatusPoster> poster(
      new TrainerStatusPoster(std::move(config), options));
  SSL_CTX* tls = SSL_CTX_new(TLS_client_method());
  if (tls == nullptr) {
    return absl::InternalError(
        absl::StrCat(kTrainerServerCaCertEnv, ": cannot create a context"));
  }
  poster->tls_ = tls;
  SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
  SSL_CTX_set_verify(tls, SSL_VERIFY_PEER, nullptr);
  std::shared_ptr<X509_STORE> ca = poster->config_.ca_store;
  if (ca == nullptr) {
    auto loaded = LoadCaStore(poster->config_.ca_cert_file);
    if (!loaded.ok()) return loaded.status();
    ca = *std::move(loaded);
  }
  SSL_CTX_set1_cert_store(tls, ca.get());
  // One file per node, kept across attempts: the last progress stands
  // until a worker writes newer.
  const char* tmp = getenv("TMPDIR");
  std::string templ = ProgressDirTemplate(tmp != nullptr ? tmp : "");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot make a directory for DISTJOB_PROGRESS_FILE (",
                     templ, "): ", std::strerror(errno)));
  }
  poster->progress_dir_ = templ;
  poster->progress_file_ = absl::StrCat(templ, "/", kProgressFileName);
  event_base* base = event_base_new();
  poster->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (base == nullptr || poster->stop_fd_ < 0) {
    if (base != nullptr) event_base_free(base);
    return absl::InternalError(
        "Trainer status push: cannot make an event loop");
  }
  poster->base_ = base;
  event* stop = event_new(
      base, poster->stop_fd_, EV_READ | EV_PERSIST,
      [](evutil_socket_t, short, void* b) {  // NOLINT(runtime/int)
        event_base_loopbreak(static_cast<event_base*>(b));
      },
      base);
  event_add(stop, nullptr);
  poster->stop_event_ = stop;
  poster->state_.phase = "rendezvous";
  TrainerStatusPoster* self = poster.get();
  poster->thread_ = std::thread([self] { self->Loop(); });
  return poster;
}

TrainerStatusPoster::~TrainerStatusPoster() {
  Shutdown();
  if (stop_event_ != nullptr) event_free(static_cast<event*>(stop_event_));
  if (base_ != nullptr) event_base_free(static_cast<event_base*>(base_));
  if (stop_fd_ >= 0) close(stop_fd_);
  if (tls_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(tls_));
  if (!progress_dir_.empty()) {
    unlink(progress_file_.c_str());
    rmdir(progress_dir_.c_str());
  }
}

void TrainerStatusPoster::Changed() {
  changed_ = true;
  cv_.notify_all();
}

void TrainerStatusPoster::SetGroupRank(int group_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = group_rank == 0;
  Changed();
}

void TrainerStatusPoster::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.phase == phase) return;
  state_.phase = phase;
  Changed();
}

void TrainerStatusPoster::SetAttempt(int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  state_.attempt = attempt;
  Changed();
}

void TrainerStatusPoster::Restarted(int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  ++state_.restarts;
  state_.attempt = attempt;
  state_.phase = "restarting";
  Changed();
}

void TrainerStatusPoster::WorkerFailed(int exit_code,
                                       const std::string& exit_class) {
  std::lock_guard<std::mutex> lock(mu_);
  state_.last_exit_code = exit_code;
  state_.last_exit_class = exit_class;
  Changed();
}

int TrainerStatusPoster::posts_accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

void TrainerStatusPoster::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    // A wake-up: an eventfd that is full already wakes the thread.
    (void)!write(stop_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
}

void TrainerStatusPoster::Warn(const std::string& message) {
  // An endpoint that is down fails every post: one warning a minute, the
  // rest at debug level.
  const absl::Time now = absl::Now();
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now - last_warning_ >= absl::Minutes(1)) {
      last_warning_ = now;
      warn = true;
    }
  }
  if (warn) {
    DJ_LOG_WARNING("Trainer status push: {}", message);
  } else {
    DJ_LOG_DEBUG("Trainer status push: {}", message);
  }
}

std::string TrainerStatusPoster::Body() {
  absl::StatusOr<std::string> read =
      ReadSmallRegularFile(progress_file_, kMaxProgressFileBytes + 1);
  // Not written yet is the usual case; anything else (a FIFO a worker left
  // there, which is refused without blocking) is worth a warning.
  if (!read.ok() && !absl::IsNotFound(read.status())) {
    Warn(absl::StrCat(read.status().message()));
  }
  const std::string text = read.ok() ? *std::move(read) : std::string();
  std::optional<TrainerProgress> fresh;
  if (text.size() > kMaxProgressFileBytes) {
    Warn(absl::StrCat(progress_file_, ": larger than ", kMaxProgressFileBytes,
                      " bytes; ignored"));
  } else if (!text.empty()) {
    absl::StatusOr<TrainerProgress> progress =
        ParseTrainerProgress(text, progress_file_);
    if (progress.ok()) {
      fresh = *std::move(progress);
    } else {
      Warn(absl::StrCat(progress.status().message(), "; ignored"));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // An invalid or half-written file keeps the last good progress.
  if (fresh) last_progress_ = *std::move(fresh);
  return TrainerStatusBody(state_, last_progress_, absl::Now());
}

void TrainerStatusPoster::Loop() {
  absl::Time last_post = absl::InfinitePast();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const absl::Time due =
        changed_ ? last_post + options_.min_gap : last_post + options_.interval;
    const absl::Duration wait = due - absl::Now();
    if (wait > absl::ZeroDuration()) {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(
                             std::min(wait, absl::Milliseconds(500))));
      continue;
    }
    if (!enabled_) {
      last_post = absl::Now();
      changed_ = false;
      continue;
    }
    changed_ = false;
    lock.unlock();
    PostOnce(options_.timeout, false);
    lock.lock();
    last_post = absl::Now();
  }
  const bool post_last = enabled_;
  lock.unlock();
  if (post_last) {
    // The stop signal broke the loop once; this post gets its own bound.
    event_del(static_cast<event*>(stop_event_));
    PostOnce(options_.final_timeout, true);
  }
}

namespace {

struct Answer {
  event_base* base = nullptr;
  int code = 0;  // 0: no answer
  std::string reason;
  // evhttp's reason to drop the answer: EVREQ_HTTP_DATA_TOO_LONG past
  // kMaxAnswerBody, EVREQ_HTTP_INVALID_HEADER for headers malformed or past
  // kMaxAnswerHeaders; -1 for none.
  int error = -1;
};

// What an answer may hold: a status endpoint says little, and a hostile or
// broken one streaming headers or a body must not grow the agent (evhttp
// buffers both whole, with no bound of its own). Past either, evhttp drops
// the connection.
constexpr ev_ssize_t kMaxAnswerHeaders = 16 * 1024;
constexpr ev_ssize_t kMaxAnswerBody = 64 * 1024;

// The warning for an answer that was not a 2xx.
std::string AnswerProblem(const Answer& answer, const std::string& url,
                          const std::string& address) {
  if (answer.error == EVREQ_HTTP_DATA_TOO_LONG ||
      answer.error == EVREQ_HTTP_INVALID_HEADER) {
    return absl::StrCat(
        url, " (", address, "): its answer ",
        answer.error == EVREQ_HTTP_DATA_TOO_LONG
            ? absl::StrCat("has more than ", kMaxAnswerBody, " bytes of body")
            : absl::StrCat("has headers that are malformed or over ",
                           kMaxAnswerHeaders, " bytes"),
        "; dropped it; the job goes on");
  }
  if (answer.code == 0) {
    return absl::StrCat(url, " (", address,
                        "): no answer (down, slow, or TLS verification "
                        "failed); the job goes on");
  }
  return absl::StrCat(url, " answered ", answer.code, " ", answer.reason,
                      "; the job goes on");
}

// The first address of the endpoint's host, resolved within `timeout`
// (each pass at most 2 s); the warning when there is none.
absl::StatusOr<std::string> FirstAddress(const TrainerStatusConfig& config,
                                         absl::Duration timeout,
                                         std::function<bool()> cancelled) {
  ResolverOptions resolver;
  resolver.pass_timeout = std::min(timeout, absl::Seconds(2));
  resolver.query_timeout = resolver.pass_timeout;
  resolver.cancelled = std::move(cancelled);
  absl::StatusOr<std::vector<std::string>> addresses =
      ResolveHost(config.host, resolver);
  if (!addresses.ok() || addresses->empty()) {
    return absl::UnavailableError(absl::StrCat(
        config.url, ": cannot resolve ", config.host, ": ",
        addresses.ok() ? "no address" : addresses.status().message()));
  }
  return addresses->front();
}

// A TLS connection to `address` that verifies the endpoint's host, bounded
// by `deadline` and by what an answer may hold; the warning when it
// cannot be made.
absl::StatusOr<evhttp_connection*> OpenConnection(
    event_base* base, SSL_CTX* tls, const TrainerStatusConfig& config,
    const std::string& address, absl::Time deadline) {
  SSL* ssl = SSL_new(tls);
  if (ssl == nullptr) {
    return absl::InternalError("cannot create a TLS session");
  }
  if (IsIpLiteral(config.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), config.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, config.host.c_str());
    SSL_set1_host(ssl, config.host.c_str());
  }
  bufferevent* bev = bufferevent_openssl_socket_new(
      base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
      BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
  if (bev == nullptr) {
    SSL_free(ssl);
    return absl::InternalError("cannot create a TLS connection");
  }
  bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  // evhttp connects to the address as given: no resolver of its own.
  evhttp_connection* connection = evhttp_connection_base_bufferevent_new(
      base, nullptr, bev, address.c_str(), static_cast<uint16_t>(config.port));
  if (connection == nullptr) {
    bufferevent_free(bev);
    return absl::InternalError("cannot create an HTTP connection");
  }
  const timeval bound = BoundTimeval(deadline - absl::Now());
  evhttp_connection_set_timeout_tv(connection, &bound);
  evhttp_connection_set_max_headers_size(connection, kMaxAnswerHeaders);
  evhttp_connection_set_max_body_size(connection, kMaxAnswerBody);
  return connection;
}

// The POST of `body` with the bearer `token`, its outcome into `*answer`;
// the warning (the request freed) when the token cannot be sent.
absl::StatusOr<evhttp_request*> NewRequest(const TrainerStatusConfig& config,
                                           const std::string& token,
                                           const std::string& body,
                                           Answer* answer) {
  evhttp_request* request = evhttp_request_new(
      [](evhttp_request* req, void* arg) {
        Answer* a = static_cast<Answer*>(arg);
        if (req != nullptr) {
          a->code = evhttp_request_get_response_code(req);
          const char* reason = evhttp_request_get_response_code_line(req);
          if (reason != nullptr) a->reason = reason;
        }
        event_base_loopbreak(a->base);
      },
      answer);
  // Called with the request's argument, before the callback above.
  evhttp_request_set_error_cb(request,
                              [](evhttp_request_error error, void* arg) {
                                static_cast<Answer*>(arg)->error = error;
                              });
  evkeyvalq* headers = evhttp_request_get_output_headers(request);
  // The default port goes unsaid, as clients send it.
  std::string host_header = JoinHostPort(config.host, config.port);
  if (config.port == 443) {
    host_header.resize(host_header.size() - std::strlen(":443"));
  }
  evhttp_add_header(headers, "Host", host_header.c_str());
  evhttp_add_header(headers, "Content-Type", "application/json");
  evhttp_add_header(headers, "Connection", "close");
  const std::string authorization = absl::StrCat("Bearer ", token);
  // The token was checked when read (one line of printable ASCII), and
  // evhttp refuses a value with a line break without a word: never post
  // without it.
  if (evhttp_add_header(headers, "Authorization", authorization.c_str()) != 0) {
    evhttp_request_free(request);
    return absl::InvalidArgumentError(
        absl::StrCat(kTrainerServerTokenEnv, "=", config.token_file,
                     ": the token has control characters; not posted"));
  }
  evbuffer_add(evhttp_request_get_output_buffer(request), body.data(),
               body.size());
  return request;
}

// Sends `request` (which the connection then owns) and runs the loop
// until its answer, its error or `deadline`; false when it cannot be sent.
bool Exchange(event_base* base, evhttp_connection* connection,
              evhttp_request* request, const std::string& path,
              absl::Time deadline) {
  if (evhttp_make_request(connection, request, EVHTTP_REQ_POST, path.c_str()) !=
      0) {
    return false;
  }
  // A second bound beside evhttp's: the loop ends at the deadline even if
  // evhttp's timer does not cover a phase.
  const timeval loop_bound = BoundTimeval(deadline - absl::Now());
  event* bound_timer = evtimer_new(
      base,
      [](evutil_socket_t, short, void* b) {  // NOLINT(runtime/int)
        event_base_loopbreak(static_cast<event_base*>(b));
      },
      base);
  evtimer_add(bound_timer, &loop_bound);
  event_base_dispatch(base);
  event_free(bound_timer);
  return true;
}

}  // namespace

void TrainerStatusPoster::PostOnce(absl::Duration timeout, bool final_post) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::string> token = LoadTrainerToken(config_.token_file);
  if (!token.ok()) {
    Warn(absl::StrCat(token.status().message(), "; not posted"));
    return;
  }
  const std::string body = Body();
  std::function<bool()> cancelled;
  if (!final_post) {
    cancelled = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return stopping_;
    };
  }
  absl::StatusOr<std::string> address =
      FirstAddress(config_, timeout, std::move(cancelled));
  if (!address.ok()) {
    Warn(std::string(address.status().message()));
    return;
  }
  event_base* base = static_cast<event_base*>(base_);
  absl::StatusOr<evhttp_connection*> connection = OpenConnection(
      base, static_cast<SSL_CTX*>(tls_), config_, *address, deadline);
  if (!connection.ok()) {
    Warn(std::string(connection.status().message()));
    return;
  }
  Answer answer;
  answer.base = base;
  absl::StatusOr<evhttp_request*> request =
      NewRequest(config_, *token, body, &answer);
  if (!request.ok()) {
    evhttp_connection_free(*connection);
    Warn(std::string(request.status().message()));
    return;
  }
  const bool sent =
      Exchange(base, *connection, *request, config_.path, deadline);
  evhttp_connection_free(*connection);
  if (!sent) {
    Warn("cannot send the request");
    return;
  }
  if (answer.code >= 200 && answer.code < 300) {
    std::lock_guard<std::mutex> lock(mu_);
    ++accepted_;
    DJ_LOG_DEBUG("Trainer status push: {} answered {}", config_.url,
                 answer.code);
    return;
  }
  Warn(AnswerProblem(answer, config_.url, *address));
}

}  // namespace distjob
