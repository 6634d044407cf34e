#include "rendezvous/dynamic/round_members.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace distjob {

absl::StatusOr<std::vector<RdzvParticipant>> ReadRoundMembers(
    StoreInterface* store, const RdzvKeys& keys, int64_t round,
    const std::string& closer, int size) {
  // A few chunks, a page or two of a listing even at 100,000 members.
  auto listing = store->List(keys.MembersPrefix(round, closer));
  if (!listing.ok()) return listing.status();
  std::vector<std::pair<int64_t, std::string>> chunks;
  for (auto& e : listing->entries) {
    if (auto first = keys.ParseMembers(e.key, round, closer);
        first.has_value()) {
      chunks.emplace_back(*first, std::move(e.value));
    }
  }
  return AssembleMembers(std::move(chunks), size);
}

std::string NameList(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  return absl::StrCat(
      absl::StrJoin(names.begin(), names.begin() + kShown, ", "), " and ",
      names.size() - kShown, " more");
}

}  // namespace distjob
