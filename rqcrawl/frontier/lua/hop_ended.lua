--#include frontier
wait_from_now(key, load_host(key))
