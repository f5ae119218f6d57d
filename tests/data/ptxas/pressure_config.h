// Included by pressure.cu: the tests edit a copy of it to check that the cache notices.
#define LIVE_VALUES 160
