// The status page on the metrics port: GET /v1/status (JSON) and GET / (HTML) against a daemon
// that holds locks and has waiters, read over HTTP and rendered by headless Chromium.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "browser.hpp"
#include "http_get.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// A resource name that is markup if the page forgot to escape it, and one too long for a phone.
const std::string markup_resource = "<i>odd&name</i>";
const std::string long_resource = "reports/" + std::string(180, 'x');

// A daemon (key prefix "app:") holding three leases and a KEEP lock granted through it, with two
// clients queued by WAIT behind "orders:42".
struct status_scene : fleet_with_metrics {
  status_scene() : fleet_with_metrics(nlohmann::json{{"key_prefix", "app:"}}) {
    for (const std::string& resource : {std::string("orders:42"), markup_resource, long_resource})
      grants.emplace(resource, take(holder, "LOCK " + resource + " 120000"));
    grants.emplace("jobs/nightly", take(keeper, "LOCK jobs/nightly 120000 KEEP LABEL cron@host7"));
    for (line_client* waiter : {&waiter_a, &waiter_b})
      waiter->send("LOCK orders:42 120000 WAIT 120000\n");
    REQUIRE(eventually([&] { return daemon.info().at("waiters") == 2; }));
  }

  static lock_grant take(line_client& client, const std::string& request) {
    const auto grant = parse_lock_ok(client.request(request));
    REQUIRE(grant);
    return *grant;
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(metrics_port) + "/"; }

  // Where a text shows an owner of this scene's locks, if anywhere.
  std::string owner_in(const std::string& text) const {
    for (const auto& [resource, grant] : grants)
      if (text.find(grant.owner) != std::string::npos)
        return "the owner of " + resource;
    return "";
  }

  line_client holder{daemon.port()};
  line_client keeper{daemon.port()};
  line_client waiter_a{daemon.port()};
  line_client waiter_b{daemon.port()};
  std::map<std::string, lock_grant> grants;
};

} // namespace

TEST_CASE("/v1/status lists the masters, the valid locks granted here and the waiters, no owner",
          "[integration][status]") {
  status_scene scene;
  const http_response response = http_get(scene.metrics_port, "/v1/status");
  REQUIRE(response.status == 200);
  CHECK(response.headers.find("Content-Type: application/json") != std::string::npos);
  CHECK(response.headers.find("Cache-Control: no-store") != std::string::npos);
  CHECK(scene.owner_in(response.body).empty());
  const nlohmann::json status = nlohmann::json::parse(response.body);

  // INFO's document, and more.
  CHECK(status.at("quorum") == 3);
  CHECK(status.at("nodes_voting") == 5);
  REQUIRE(status.at("nodes").size() == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(status.at("nodes")[i].at("address") == scene.fleet.addresses()[i]);
    CHECK(status.at("nodes")[i].at("state") == "ok");
  }
  CHECK(status.at("counters").at("acquired") == 4);
  CHECK(status.at("rates").at("per_s").contains("acquired"));
  CHECK(status.at("rates").at("since_start_per_s").at("acquired") > 0);

  CHECK(status.at("locks_total") == 4);
  REQUIRE(status.at("locks").size() == 4);
  for (const auto& lock : status.at("locks")) {
    const std::string resource = lock.at("resource");
    INFO(resource);
    REQUIRE(scene.grants.count(resource) == 1); // without the key prefix
    CHECK(lock.at("fence") == scene.grants.at(resource).fence);
    CHECK(lock.at("kind") == "exclusive");
    CHECK(lock.at("label") == (resource == "jobs/nightly" ? "cron@host7" : ""));
    CHECK(lock.at("keep") == (resource == "jobs/nightly"));
    CHECK(lock.at("valid_ms") > 0);
    CHECK(lock.at("valid_ms") <= 120000);
  }
  CHECK(status.at("waiting") == nlohmann::json::parse(R"([{"resource":"orders:42","waiters":2}])"));
  CHECK(status.at("waiting_total") == 1);

  // An UNLOCK takes a lock off the list (here it goes to the head waiter, granted through this
  // daemon: it is listed under its new fence).
  const lock_grant old = scene.grants.at("orders:42");
  REQUIRE(scene.holder.request("UNLOCK orders:42 " + old.owner) == "OK");
  REQUIRE(parse_lock_ok(scene.waiter_a.read_line()));
  const nlohmann::json after =
      nlohmann::json::parse(http_get(scene.metrics_port, "/v1/status").body);
  for (const auto& lock : after.at("locks"))
    if (lock.at("resource") == "orders:42")
      CHECK(lock.at("fence") > old.fence);
  CHECK(after.at("waiting").at(0).at("waiters") == 1);
}

TEST_CASE("/v1/status names the kind of each lock of the family", "[integration][status]") {
  fleet_with_metrics env;
  line_client client(env.daemon.port());
  std::vector<std::string> owners;
  for (const std::string request :
       {"LOCK doc 60000 SHARED", "LOCK pool 60000 PERMITS 2", "MLOCK 2 a b 60000"}) {
    const auto grant = parse_lock_ok(client.request(request));
    INFO(request);
    REQUIRE(grant);
    owners.push_back(grant->owner);
  }
  const http_response response = http_get(env.metrics_port, "/v1/status");
  REQUIRE(response.status == 200);
  for (const std::string& owner : owners)
    CHECK(response.body.find(owner) == std::string::npos);
  const nlohmann::json status = nlohmann::json::parse(response.body);
  std::multiset<std::string> kinds;
  for (const auto& lock : status.at("locks"))
    kinds.insert(lock.at("kind").get<std::string>());
  CHECK(kinds == std::multiset<std::string>{"multi", "permit", "shared"});
}

TEST_CASE("GET / is one HTML page without script that escapes what clients named",
          "[integration][status]") {
  status_scene scene;
  const http_response response = http_get(scene.metrics_port, "/");
  REQUIRE(response.status == 200);
  CHECK(response.headers.find("Content-Type: text/html; charset=utf-8") != std::string::npos);
  CHECK(response.headers.find("Content-Security-Policy: default-src 'none'") != std::string::npos);
  CHECK(response.body.find("<meta http-equiv=\"refresh\"") != std::string::npos);
  CHECK(response.body.find("<script") == std::string::npos);
  CHECK(response.body.find(markup_resource) == std::string::npos);
  CHECK(response.body.find("&lt;i&gt;odd&amp;name&lt;/i&gt;") != std::string::npos);
  CHECK(scene.owner_in(response.body).empty());
  CHECK(http_get(scene.metrics_port, "/index.html").status == 404);
}

TEST_CASE("headless Chromium renders the status page with scripts off, wide and narrow",
          "[integration][status][browser]") {
  if (headless_browser::executable().empty()) {
    cannot_run("chromium is not installed (Debian package chromium; scripts/setup --test "
               "installs it): the status page cannot be checked in a browser");
    return;
  }
  status_scene scene;
  temp_dir dir("redlockd-browser");
  const std::filesystem::path artifacts = REDLOCKD_TEST_ARTIFACTS;
  std::filesystem::create_directories(artifacts);
  headless_browser browser(dir.path());

  // What a person sees: each table's rows as {column heading: text}, and the page's width.
  const std::string read_page = R"((() => {
    const rows = id => [...document.querySelectorAll('#' + id + ' tbody tr')].map(tr =>
        Object.fromEntries([...tr.cells].map(td => [td.dataset.label, td.innerText.trim()])));
    const root = document.documentElement;
    return {title: document.title, masters: rows('masters'), locks: rows('locks'),
            waiting: rows('waiting'), counters: rows('counters'), scripts: document.scripts.length,
            markup_in_locks: document.querySelectorAll('#locks i').length,
            html: root.outerHTML, scroll_width: root.scrollWidth, client_width: root.clientWidth,
            locks_head: getComputedStyle(document.querySelector('#locks thead')).display,
            time_left_label:
                getComputedStyle(document.querySelector('#locks td.valid_ms'), '::before').content};
  })())";

  SECTION("wide") {
    browser.open(scene.url(), 1280, 900);
    const nlohmann::json page = browser.evaluate(read_page);
    browser.screenshot(artifacts / "status-page-wide.png");
    std::cout << "screenshot: " << (artifacts / "status-page-wide.png").string() << "\n";
    CHECK(page.at("title") == "redlockd status");
    CHECK(page.at("scripts") == 0);
    CHECK(scene.owner_in(page.at("html")).empty());

    REQUIRE(page.at("masters").size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(page.at("masters")[i].at("Address") == scene.fleet.addresses()[i]);
      CHECK(page.at("masters")[i].at("State") == "ok");
    }
    REQUIRE(page.at("locks").size() == 4);
    for (const auto& row : page.at("locks")) {
      const std::string resource = row.at("Resource");
      INFO(resource);
      REQUIRE(scene.grants.count(resource) == 1); // the markup name as text
      CHECK(row.at("Fence") == std::to_string(scene.grants.at(resource).fence));
      CHECK(row.at("Kind") == "exclusive");
      const std::string left = row.at("Time left");
      CHECK((left.ends_with(" s") || left.ends_with(" ms"))); // e.g. "1 min 59 s"
      CHECK(row.at("KEEP") == (resource == "jobs/nightly" ? "yes" : "no"));
      if (resource == "jobs/nightly")
        CHECK(row.at("Label") == "cron@host7");
    }
    CHECK(page.at("markup_in_locks") == 0);
    REQUIRE(page.at("waiting").size() == 1);
    CHECK(page.at("waiting")[0].at("Resource") == "orders:42");
    CHECK(page.at("waiting")[0].at("Waiters") == "2");
    bool acquired = false;
    for (const auto& row : page.at("counters"))
      acquired = acquired || (row.at("Counter") == "acquired" && row.at("Since start") == "4");
    CHECK(acquired);

    // It refreshes itself, scripts off: the page loads again (every 5 s).
    CHECK(browser.reloaded_within(20s));
  }
  SECTION("narrow") {
    browser.open(scene.url(), 360, 740);
    const nlohmann::json page = browser.evaluate(read_page);
    browser.screenshot(artifacts / "status-page-narrow.png");
    std::cout << "screenshot: " << (artifacts / "status-page-narrow.png").string() << "\n";
    // Nothing wider than the window, the 188-byte resource name included.
    CHECK(page.at("scroll_width") <= page.at("client_width"));
    CHECK(page.at("client_width") == 360);
    REQUIRE(page.at("locks").size() == 4);
    // Each cell says what it is: the table heading moves into the row.
    CHECK(page.at("locks_head") == "none");
    CHECK(page.at("time_left_label") == "\"Time left\"");
  }
}
