package dev.redlockd.client;

import java.time.Duration;

/**
 * What {@code STATUS <resource>} says: whether a LOCK now would be refused, read from the masters,
 * without ever naming the owner. A snapshot for people and monitoring, never a substitute for LOCK.
 *
 * @param held true when a LOCK now would be refused ({@code BUSY})
 * @param remaining when held, a lower bound of the time it stays held unless released; zero when
 *     free
 */
public record Status(boolean held, Duration remaining) {}
