module redlockd.dev/client

go 1.19
