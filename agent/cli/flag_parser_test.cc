#include "agent/cli/flag_parser.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

struct Parsed {
  std::string name = "unset";
  std::string source;
  bool on = false;
};

FlagSet MakeFlags(Parsed* p) {
  FlagSet flags("usage");
  Flag name;
  name.names = {"some-name", "s"};
  name.env = {"PET_SOME_NAME", "DISTJOB_SOME_NAME"};
  name.metavar = "NAME";
  name.set = [p](absl::string_view v, absl::string_view source) {
    if (v == "bad") return absl::InvalidArgumentError("'bad' is not a name");
    p->name = std::string(v);
    p->source = std::string(source);
    return absl::OkStatus();
  };
  flags.Add(name);
  Flag on;
  on.names = {"turn-on"};
  on.env = {"PET_TURN_ON"};
  on.is_bool = true;
  on.set = [p](absl::string_view v, absl::string_view) {
    p->on = v != "0";
    return absl::OkStatus();
  };
  flags.Add(on);
  return flags;
}

TEST(FlagSetTest, AcceptsBothSpellingsAndBothValueForms) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--some-name", "x"},
                                             {"--some_name", "x"},
                                             {"--some-name=x"},
                                             {"--some_name=x"},
                                             {"-s", "x"},
                                             {"-sx"}}) {
    Parsed p;
    auto rest = MakeFlags(&p).Parse(args, {});
    ASSERT_TRUE(rest.ok()) << rest.status();
    EXPECT_EQ(p.name, "x") << args[0];
  }
}

TEST(FlagSetTest, CommandLineWinsOverEnvironmentAndFirstEnvVarWins) {
  Parsed p;
  EnvMap env{{"PET_SOME_NAME", "pet"}, {"DISTJOB_SOME_NAME", "dj"}};
  ASSERT_TRUE(MakeFlags(&p).Parse({}, env).ok());
  EXPECT_EQ(p.name, "pet");
  EXPECT_EQ(p.source, "PET_SOME_NAME");
  ASSERT_TRUE(MakeFlags(&p).Parse({"--some-name", "cli"}, env).ok());
  EXPECT_EQ(p.name, "cli");
}

TEST(FlagSetTest, BooleanFromEnvironmentCountsPresenceEvenWhenEmpty) {
  Parsed p;
  ASSERT_TRUE(MakeFlags(&p).Parse({}, {{"PET_TURN_ON", ""}}).ok());
  EXPECT_TRUE(p.on);
  Parsed q;
  ASSERT_TRUE(MakeFlags(&q).Parse({}, {{"PET_TURN_ON", "0"}}).ok());
  EXPECT_FALSE(q.on);
  Parsed r;
  auto bad = MakeFlags(&r).Parse({}, {{"PET_TURN_ON", "maybe"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PET_TURN_ON"), std::string::npos);
}

TEST(FlagSetTest, RemainderStartsAtFirstPositionalOrAfterDoubleDash) {
  Parsed p;
  auto rest =
      MakeFlags(&p).Parse({"--turn-on", "train.py", "--some-name", "y"}, {});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, (std::vector<std::string>{"train.py", "--some-name", "y"}));
  EXPECT_EQ(p.name, "unset");
  auto after = MakeFlags(&p).Parse({"--", "--some-name", "z"}, {});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (std::vector<std::string>{"--some-name", "z"}));
}

TEST(FlagSetTest, SetParsedStoresTheParsedValueOrNamesTheFlag) {
  int level = -1;
  FlagSet flags("usage");
  flags.Add(AgentFlag(
      "level", "N", "",
      SetParsed(&level, [](absl::string_view v) -> absl::StatusOr<int> {
        if (v == "high") return 3;
        return absl::InvalidArgumentError(
            absl::StrCat("'", v, "' is not high"));
      })));
  ASSERT_TRUE(flags.Parse({"--level", "high", "cmd"}, {}).ok());
  EXPECT_EQ(level, 3);
  auto bad = flags.Parse({"--level", "low", "cmd"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--level"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'low' is not high"),
            std::string::npos);
}

TEST(FlagSetTest, ErrorsNameTheFlag) {
  Parsed p;
  auto unknown = MakeFlags(&p).Parse({"--nope=1"}, {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'--nope'"), std::string::npos);
  auto missing = MakeFlags(&p).Parse({"--some-name"}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("needs a value (NAME)"),
            std::string::npos);
  auto bad = MakeFlags(&p).Parse({"--some_name", "bad"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "option --some_name: 'bad' is not a name");
  auto bad_env = MakeFlags(&p).Parse({}, {{"PET_SOME_NAME", "bad"}});
  ASSERT_FALSE(bad_env.ok());
  EXPECT_NE(bad_env.status().message().find("PET_SOME_NAME=bad"),
            std::string::npos);
}

TEST(FlagSetTest, HelpListsSpellingsAndEnv) {
  Parsed p;
  const std::string help = MakeFlags(&p).Help();
  EXPECT_NE(help.find("--some-name, -s NAME"), std::string::npos);
  EXPECT_NE(help.find("[env: PET_SOME_NAME, DISTJOB_SOME_NAME]"),
            std::string::npos);
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

TEST(FlagSetTest, UniquePrefixOfALongOptionIsThatOption) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--some", "x"}, {"--some_n=x"}, {"--so", "x"}}) {
    Parsed p;
    auto rest = MakeFlags(&p).Parse(args, {});
    ASSERT_TRUE(rest.ok()) << rest.status();
    EXPECT_EQ(p.name, "x") << args[0];
  }
  Parsed p;
  ASSERT_TRUE(MakeFlags(&p).Parse({"--turn"}, {}).ok());
  EXPECT_TRUE(p.on);
}

TEST(FlagSetTest, AmbiguousPrefixNamesTheCandidates) {
  Parsed p;
  FlagSet flags = MakeFlags(&p);
  Flag other;
  other.names = {"some-other"};
  other.set = [](absl::string_view, absl::string_view) {
    return absl::OkStatus();
  };
  flags.Add(other);
  auto rest = flags.Parse({"--some", "x"}, {});
  ASSERT_FALSE(rest.ok());
  EXPECT_EQ(rest.status().message(),
            "ambiguous option '--some' could match --some-name, --some-other");
  EXPECT_TRUE(flags.Parse({"--some-o", "x"}, {}).ok());
}

}  // namespace
}  // namespace distjob
