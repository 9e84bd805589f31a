// A user's program outside the checkout, compiled and run against the client's jar alone
// (scripts/test-clients java-package), as a team that copies the jar into its build would.
import dev.redlockd.client.Lease;
import dev.redlockd.client.LockBusyException;
import dev.redlockd.client.RedlockdClient;
import java.time.Duration;

public class Consumer {
  public static void main(String[] args) throws Exception {
    String address = System.getenv("REDLOCKD_ADDR");
    if (address == null) {
      throw new IllegalStateException("REDLOCKD_ADDR is not set");
    }
    try (RedlockdClient client = RedlockdClient.builder().addresses(address).build()) {
      long fence;
      try (Lease lease = client.acquire("package:java", Duration.ofSeconds(10))) {
        fence = lease.fence();
        try {
          client.acquire("package:java", Duration.ofSeconds(1)).close();
          throw new AssertionError("a second acquire was granted while the first is held");
        } catch (LockBusyException expected) {
          // what the first holder's lease promises
        }
        if (!client.status("package:java").held()) {
          throw new AssertionError("status says free while held");
        }
      }
      if (client.status("package:java").held()) {
        throw new AssertionError("status says held once released");
      }
      System.out.println("dev.redlockd.client from its jar: lock " + fence + ", busy, status");
    }
  }
}
