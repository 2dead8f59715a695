// Placeholder until the Beast server lands: the dashboard address is accepted and reserved.
#include "scheduler/dashboard.h"

#include "scheduler/scheduler.h"

namespace psched {

struct Dashboard::Impl {};

Dashboard::Dashboard(boost::asio::io_context&, const Scheduler&) {}
Dashboard::~Dashboard() = default;
Status Dashboard::start(const std::string&) { return Status::ok(); }
void Dashboard::stop() {}
uint16_t Dashboard::port() const { return 0; }
std::string Dashboard::url() const { return ""; }

}  // namespace psched
